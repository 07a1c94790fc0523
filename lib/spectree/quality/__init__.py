"""Notebook 11's study of draft quality: the synthetic draft mix:λ at chosen top-1 agreements and every paper claim
re-read at each (`quality`), and the readings by agreement (`quality_readings`)."""
