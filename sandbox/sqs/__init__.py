"""SQS beyond moto: the dead-letter queue redrive API (sandbox/sqs/message_moves.py)."""

from sandbox.sqs.message_moves import MessageMoves

__all__ = ["MessageMoves"]
