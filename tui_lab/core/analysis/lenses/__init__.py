"""Reading a layer through the unembedding: the logit lens, direct logit attribution, the embedding's Fourier power."""
