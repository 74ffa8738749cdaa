"""How different sibling paths are: BLEU between them and the cosine of their embeddings."""
