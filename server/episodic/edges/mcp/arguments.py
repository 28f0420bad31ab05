"""The arguments of each MCP tool: one pydantic model per tool, whose JSON schema is the
tool's input schema and which checks a call before any use case runs. Descriptions are
written for the model that reads them. Only shapes and bounds are checked here; the rules
(id syntax, size limits, what a mode needs) are the domain's, so both transports agree."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from episodic.domain.knowledge import MAX_METADATA_ENTRIES

MAX_ID_CHARS = 128
MAX_EPISODE_RESULTS = 20
MAX_MEMORY_RESULTS = 50
MAX_KNOWLEDGE_RESULTS = 20
MAX_LABELS = 20  # topics or entities of one memory
MAX_USER_RESULTS = 100


class Arguments(BaseModel):
    """Unknown arguments are refused, so a misspelt one is named instead of ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _id(description: str) -> object:
    return Field(min_length=1, max_length=MAX_ID_CHARS, description=description)


AgentId = Annotated[
    str, _id("The agent's id: 1-128 letters, digits and . _ : @ -, starting with a letter or digit.")
]
UserId = Annotated[str, _id("The end user's id, as the host application knows them (same syntax).")]
EpisodeId = Annotated[str, _id("The conversation's id, as start_episode returned it.")]
SearchMode = Literal["hybrid", "semantic", "recency"]
MemoryKind = Literal["fact", "preference", "event"]
_MODE = (
    "hybrid (default): meaning and words together; semantic: meaning only; "
    "recency: newest first, no query needed."
)


class CreateAgentArguments(Arguments):
    agent_id: AgentId
    system_prompt: str = Field("", description="The agent's system prompt, rendered first in its context.")
    model: str = Field("", description="The model the agent talks to (e.g. gpt-4o); picks the tokenizer.")
    display_name: str = Field("", description="A human-readable name.")


class StartEpisodeArguments(Arguments):
    agent_id: AgentId
    user_id: UserId
    episode_id: str = Field(
        "",
        max_length=MAX_ID_CHARS,
        description="Optional id of your own; an open conversation with this id is returned as it is.",
    )


class AddMessageArguments(Arguments):
    episode_id: EpisodeId
    role: Literal["user", "assistant", "system"] = Field(description="Who said it.")
    content: str = Field(min_length=1, description="The message text, verbatim.")
    client_message_id: str = Field(
        "",
        max_length=MAX_ID_CHARS,
        description="Optional idempotency id: sending the same message again with it stores it once.",
    )


class GetContextArguments(Arguments):
    episode_id: EpisodeId
    message: str = Field(
        "",
        description="The user's new message that the model is about to answer; rendered last. "
        "Used as the query for past conversations and known facts unless recall_query is set.",
    )
    append_message: bool = Field(
        False,
        strict=True,
        description="true: also store `message` in the conversation as the user's message.",
    )
    recall_query: str = Field("", description="Optional: what to look for in past conversations instead.")


class CloseEpisodeArguments(Arguments):
    episode_id: EpisodeId
    reason: Literal["user_ended", "agent_decision"] = Field(
        "user_ended", description="user_ended: the user finished; agent_decision: the assistant ended it."
    )
    note: str = Field("", description="Optional note on why it ended.")


class SearchEpisodesArguments(Arguments):
    agent_id: AgentId
    user_id: UserId
    query: str = Field("", description="What to look for, in plain words. Required unless mode is recency.")
    mode: SearchMode = Field("hybrid", description=_MODE)
    limit: int = Field(
        5, ge=1, le=MAX_EPISODE_RESULTS, strict=True, description="Most conversations to return."
    )


class SearchMemoriesArguments(Arguments):
    agent_id: AgentId
    user_id: UserId
    query: str = Field("", description="What to look for, in plain words. Required unless mode is recency.")
    mode: SearchMode = Field("hybrid", description=_MODE)
    kinds: list[MemoryKind] = Field(
        default_factory=list, max_length=3, description="Only these kinds; empty: every kind."
    )
    limit: int = Field(5, ge=1, le=MAX_MEMORY_RESULTS, strict=True, description="Most memories to return.")


class RememberArguments(Arguments):
    agent_id: AgentId
    user_id: UserId
    text: str = Field(
        min_length=1,
        description="One durable statement about the user, in the third person "
        "(e.g. 'Prefers window seats'). No greetings, questions or anything the user asked not to keep.",
    )
    kind: MemoryKind = Field("fact", description="fact, preference, or event (give event_time).")
    topics: list[str] = Field(default_factory=list, max_length=MAX_LABELS, description="Optional topics.")
    entities: list[str] = Field(
        default_factory=list, max_length=MAX_LABELS, description="Optional people, places, things named."
    )
    event_time: datetime | None = Field(
        None, description="For an event: when it happens or happened, ISO 8601 (UTC if no offset)."
    )
    episode_id: str = Field(
        "",
        max_length=MAX_ID_CHARS,
        description="Optional: the conversation it comes from (one of this agent's and user's).",
    )


class ForgetArguments(Arguments):
    memory_id: str = Field(
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="The memory's id, from search_memories or remember.",
    )


DocumentId = Annotated[
    str,
    _id(
        "The document's id within the agent (same syntax as agent_id), chosen by you, e.g. "
        "'handbook' or 'faq-billing'."
    ),
]
Metadata = dict[str, str]


class SearchKnowledgeArguments(Arguments):
    agent_id: AgentId
    query: str = Field("", description="What to look for, in plain words. Required unless mode is recency.")
    mode: SearchMode = Field(
        "hybrid",
        description="hybrid (default): meaning and words together; semantic: meaning only; "
        "recency: chunks of the most recently updated documents, no query needed.",
    )
    limit: int = Field(5, ge=1, le=MAX_KNOWLEDGE_RESULTS, strict=True, description="Most passages to return.")
    metadata: Metadata = Field(
        default_factory=dict,
        max_length=MAX_METADATA_ENTRIES,
        description="Optional filter: only documents carrying every one of these key/value pairs "
        '(exact match), e.g. {"team": "hr"}.',
    )


class AddDocumentArguments(Arguments):
    agent_id: AgentId
    document_id: DocumentId
    text: str = Field(
        min_length=1,
        description="The document's full text (at most 2 MiB). It is cut into passages, each "
        "searchable on its own and quoted by its character span in this text.",
    )
    title: str = Field("", description="Optional title; it helps each passage be found.")
    uri: str = Field("", description="Optional link to where the document lives, returned with its passages.")
    format: Literal["text", "markdown"] = Field(
        "markdown", description="markdown (default): cut at headings and paragraphs; text: plain text."
    )
    metadata: Metadata = Field(
        default_factory=dict,
        max_length=MAX_METADATA_ENTRIES,
        description='Optional string labels (e.g. {"team": "hr"}) that search_knowledge can filter on.',
    )


class DeleteDocumentArguments(Arguments):
    agent_id: AgentId
    document_id: str = Field(
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="The document's id, as given to add_document (search_knowledge returns it).",
    )


class ListUsersArguments(Arguments):
    agent_id: AgentId
    limit: int = Field(20, ge=1, le=MAX_USER_RESULTS, strict=True, description="Most users to return.")
    page_token: str = Field(
        "",
        max_length=1024,
        description="next_page_token of the previous call, for the next page; empty: the first.",
    )
