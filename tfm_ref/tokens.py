"""The special token ids every vocabulary of the course shares: padding, start and end of a sequence."""
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2

__all__ = ["PAD_ID", "BOS_ID", "EOS_ID"]
