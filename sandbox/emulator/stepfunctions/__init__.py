"""Step Functions as AWS runs it, where moto's state machine engine differs: the seams installed on it."""
