"""The interchange, the norm-matched placebo and the arbitrary targets beside TransformerLens
4.3's (``tools/analysis/interchange.py``), run in the throwaway venv /tmp/ref-tl when it is
there; test_das.py guards the same maths without it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from tui_lab.core.analysis.probes.das import Pairs, arbitrary_targets, interchange, placebo

REF = Path("/tmp/ref-tl/bin/python")
SCRIPT = """
import json, sys, torch
from transformer_lens.tools.analysis.interchange import (
    NormMatchedPlacebo, SubspaceInterchange, arbitrary_targets)
data = json.loads(sys.stdin.read())
f64 = torch.float64
base, source = torch.tensor(data["base"], dtype=f64), torch.tensor(data["source"], dtype=f64)
basis, random = torch.tensor(data["basis"], dtype=f64), torch.tensor(data["random"], dtype=f64)
swap = SubspaceInterchange(basis)
print(json.dumps({"swap": swap(base, source).tolist(),
                  "placebo": NormMatchedPlacebo(swap, random)(base, source).tolist(),
                  "targets": arbitrary_targets(data["keys"], 5, 3).tolist()}))
"""


@pytest.mark.skipif(not REF.exists(), reason="no TransformerLens 4.3 reference venv at /tmp/ref-tl")
def test_the_same_as_transformer_lens() -> None:
    gen = torch.Generator().manual_seed(0)
    d, k, b = 16, 3, 6
    basis, _ = torch.linalg.qr(torch.randn(d, k, generator=gen, dtype=torch.float64))
    random, _ = torch.linalg.qr(torch.randn(d, k, generator=gen, dtype=torch.float64))
    base = torch.randn(b, d, generator=gen, dtype=torch.float64)
    source = torch.randn(b, d, generator=gen, dtype=torch.float64)
    keys = list(range(40))
    payload = {"base": base.tolist(), "source": source.tolist(), "basis": basis.tolist(),
               "random": random.tolist(), "keys": keys}
    proc = subprocess.run([str(REF), "-c", SCRIPT], input=json.dumps(payload), capture_output=True, text=True,
                          timeout=300, check=True)
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    position = torch.zeros(b, dtype=torch.long)  # the lab's (B, T, d) with T = 1
    ours_swap = interchange(base[:, None], position, source, basis)[:, 0]
    ours_placebo = placebo(base[:, None], position, source, basis, random)[:, 0]
    torch.testing.assert_close(ours_swap, torch.tensor(theirs["swap"], dtype=torch.float64))
    torch.testing.assert_close(ours_placebo, torch.tensor(theirs["placebo"], dtype=torch.float64))
    pairs = Pairs(torch.zeros(40), torch.zeros(40), torch.zeros(40), torch.zeros(40, 1), torch.zeros(40),
                  key=torch.tensor(keys))
    assert arbitrary_targets(pairs, torch.arange(5), 3).tolist() == theirs["targets"]
