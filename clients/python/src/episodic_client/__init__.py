"""Typed Python client for the Episodic gRPC memory service.

    from episodic_client import AsyncEpisodicClient, EpisodicClient

Methods mirror the RPCs of episodic.v1 and return the generated response messages
(`episodic_client.v1.*_pb2`). Failures raise `EpisodicClientError` subclasses."""

from episodic_client.aio_client import AsyncEpisodicClient
from episodic_client.chat import ChatPrompt, to_chat_messages
from episodic_client.context import BuiltContext
from episodic_client.errors import (
    AlreadyExistsError,
    EpisodicClientError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
)
from episodic_client.knowledge_requests import UNCHANGED, document_input, knowledge_item
from episodic_client.memory_requests import memory_input
from episodic_client.requests import message_input, tool_call, tool_result
from episodic_client.sync_client import EpisodicClient
from episodic_client.v1.agent_pb2 import Agent, MemoryConfig
from episodic_client.v1.context_pb2 import ContextMessage, ContextReport, ModelCall
from episodic_client.v1.episode_pb2 import Episode, Message, MessageInput, ToolCall, ToolResult
from episodic_client.v1.knowledge_pb2 import Document, DocumentChunk, KnowledgeItem, RenderedKnowledge
from episodic_client.v1.knowledge_service_pb2 import DocumentInput, KnowledgeHit

__version__ = "0.1.0"

__all__ = [
    "UNCHANGED",
    "Agent",
    "AlreadyExistsError",
    "AsyncEpisodicClient",
    "BuiltContext",
    "ChatPrompt",
    "ContextMessage",
    "ContextReport",
    "Document",
    "DocumentChunk",
    "DocumentInput",
    "Episode",
    "EpisodicClient",
    "EpisodicClientError",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "KnowledgeHit",
    "KnowledgeItem",
    "MemoryConfig",
    "Message",
    "MessageInput",
    "ModelCall",
    "NotFoundError",
    "PermissionDeniedError",
    "RenderedKnowledge",
    "ResourceExhaustedError",
    "ToolCall",
    "ToolResult",
    "UnauthenticatedError",
    "UnavailableError",
    "document_input",
    "knowledge_item",
    "memory_input",
    "message_input",
    "to_chat_messages",
    "tool_call",
    "tool_result",
]
