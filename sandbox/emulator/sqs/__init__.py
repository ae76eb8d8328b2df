"""SQS beyond moto: the dead-letter queue redrive API (sandbox/emulator/sqs/message_moves.py)."""

from sandbox.emulator.sqs.message_moves import MessageMoves

__all__ = ["MessageMoves"]
