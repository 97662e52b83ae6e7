"""Circuits as edges: the component graph, EAP and EAP-IG, exact edge and path patching, faithfulness."""
