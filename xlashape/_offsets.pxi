# vectorized index maps (to be written)
