"""IndexUtil (placeholder: being written)."""
