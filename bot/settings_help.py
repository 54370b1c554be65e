"""What each setting means, in the words of ``docs/configuration.md`` and ``.env.example``.

``bot.settings`` says what a setting is (its type, default and checks); this module says
what it is for, grouped as people look for it. A field's own ``Field(description=...)``
wins over the text here, so a new setting may carry its description where it is declared.
``bot.settings_doc`` renders both files from the two and refuses a setting without a
description.
"""

from __future__ import annotations

__all__ = ["DESCRIPTIONS", "SECTIONS"]

SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Language model", (
        "openai_api_key", "openai_base_url", "llm_provider", "model_name",
        "summary_model_name", "llm_timeout", "llm_max_retries", "summary_timeout",
        "llm_concurrency", "summary_concurrency", "embedding_model", "embedding_timeout",
    )),
    ("Storage", ("database_url", "database_pool_size", "sqlite_synchronous", "retention_days")),
    ("Memory", (
        "context_tokens", "reply_tokens", "summary_tokens", "facts_tokens", "recall_tokens",
        "window_tokens", "keep_tokens", "max_history_messages", "keep_recent_messages",
    )),
    ("Behaviour", (
        "system_prompt", "record_mode", "always_reply_channels", "stream_replies",
        "user_rate_limit", "max_input_chars", "timezone",
    )),
    ("Per-channel settings and quotas", (
        "allowed_models", "daily_tokens_per_user", "daily_tokens_per_server",
    )),
    ("Files and images", (
        "attachment_max_chars", "attachment_max_bytes", "attachment_timeout", "vision",
        "vision_models",
    )),
    ("Restarts and downtime", (
        "backfill_max_messages", "shutdown_grace_seconds", "answer_missed_seconds",
        "reply_claim_seconds",
    )),
    ("Discord", (
        "discord_token", "discord_guild_ids", "discord_reset_permission", "shard_count",
        "shard_ids",
    )),
    ("Slack", (
        "slack_bot_token", "slack_app_token", "slack_signing_secret", "slack_admin_user_ids",
        "host", "port",
    )),
    ("Logs and the admin server", (
        "log_level", "log_format", "admin_port", "admin_host", "admin_inspector", "admin_token",
        "summary_history",
    )),
)

DESCRIPTIONS: dict[str, str] = {
    # Language model
    "openai_api_key": "Key for api.openai.com. A placeholder such as YOUR_API_KEY is an error.",
    "openai_base_url": "Any OpenAI-compatible endpoint instead of api.openai.com: Ollama "
    "http://localhost:11434/v1, vLLM, llama.cpp, LM Studio, OpenRouter.",
    "llm_provider": "Which model answers. Unset: openai when a key or base URL is set, else "
    "offline (answers that no model is configured; extractive summaries). openai without a "
    "key or URL is an error, never a silent fallback.",
    "model_name": "Model that writes the replies.",
    "summary_model_name": "Model for summaries and /summary. Unset: MODEL_NAME.",
    "llm_timeout": "Seconds per reply request, counted from when the call gets its slot.",
    "llm_max_retries": "Retries of a failed request (Retry-After is honoured).",
    "summary_timeout": "Seconds per summarizer call.",
    "llm_concurrency": "Model calls at once to the endpoint: its parallel slots (1 for a "
    "one-slot llama.cpp). Replies and /summary go before background summaries and preempt "
    "one when every slot is taken; a channel's summary preempted once runs next time.",
    "summary_concurrency": "Background summaries in flight at once, process-wide; the rest wait.",
    # Storage
    "database_url": "sqlite:///relative/path.db, sqlite:////absolute/path.db, or "
    "postgresql://user:password@host:5432/db (needs the postgres extra; several replicas can "
    "share it; a #schema suffix picks a schema). The container image uses "
    "sqlite:////data/gistbot.db.",
    "database_pool_size": "PostgreSQL connections per process.",
    "sqlite_synchronous": "SQLite durability: FULL survives power loss, NORMAL survives "
    "process crashes.",
    "retention_days": "Delete turns that are already summarized after this many days. "
    "Unset: keep forever.",
    # Memory
    "context_tokens": "The whole prompt budget of one reply, the reply included.",
    "reply_tokens": "Tokens reserved for the reply.",
    "summary_tokens": "Bound on the rolling summary. Unset: a tenth of CONTEXT_TOKENS - "
    "REPLY_TOKENS, between 100 and 600.",
    "facts_tokens": "Carried identifiers in the prompt, most relevant to the message first "
    "(the rest stay stored).",
    "recall_tokens": "Cap on what a reply recalls by search (older stored messages, "
    "long-term facts, episodes). Unset: whatever the rest of the budget leaves; 0 turns "
    "recall off.",
    "window_tokens": "Compact when a channel's unsummarized turns pass this many tokens. "
    "0: derived from the budget (40% of what the summary leaves of the memory budget).",
    "keep_tokens": "Fold the oldest turns down to this many tokens (smaller than "
    "WINDOW_TOKENS). 0: derived (10%).",
    "max_history_messages": "The original sliding window: compact past this many "
    "unsummarized messages (e.g. 10). Setting it, or KEEP_RECENT_MESSAGES, selects the "
    "message window.",
    "keep_recent_messages": "With the message window, keep this many messages verbatim "
    "(e.g. 4; smaller than MAX_HISTORY_MESSAGES).",
    # Behaviour
    "system_prompt": "The bot's instructions: the default persona (a channel or server may "
    "set its own with /config).",
    "record_mode": "all: remember every human message the bot can see; addressed: only "
    "messages to the bot and its replies.",
    "always_reply_channels": "Comma-separated channel ids where every message gets a reply "
    "(elsewhere: mentions, DMs and replies to the bot).",
    "stream_replies": "Edit the reply in place as the model writes it (at most once a second).",
    "user_rate_limit": "Replies per person per minute; past it they are told once and their "
    "messages are still remembered. 0: no limit (the console is exempt).",
    "max_input_chars": "Longest message kept, in characters; a longer one is stored cut with "
    "a marker and, when addressed to the bot, politely refused. 0: no limit.",
    "timezone": "IANA time zone (e.g. Europe/Berlin) for /catchup words such as yesterday "
    "or noon, the times catch-ups print, and /digest times that name no zone.",
    # Per-channel settings and quotas
    # Files and images
    "attachment_max_chars": "Text read from a message's attachments (text, Markdown, code, "
    "CSV, JSON, YAML, logs, PDF text) that is kept with it, in characters; more is cut with "
    "a marker that says how much was left out. 0: attachments are not read, only named.",
    "attachment_max_bytes": "Largest attachment fetched, in bytes (checked before and during "
    "the download); a larger one is noted by name only.",
    "attachment_timeout": "Seconds one attachment may take to download and read; a reply "
    "waits at most this long for its message's files.",
    "vision": "Send images to the model: auto (models known to accept images: gpt-4o, "
    "gpt-4.1 and VISION_MODELS), on or off. Without it an image is noted with its size.",
    "vision_models": "Comma-separated model names that accept images, for VISION=auto "
    "(e.g. llava,qwen2.5-vl).",
    "allowed_models": "Comma-separated models a channel or server may choose with /config "
    "(e.g. gpt-4o-mini,gpt-4o). Unset: just MODEL_NAME.",
    "daily_tokens_per_user": "Tokens one person may use a day per server, from the "
    "provider's reported usage; reset at 00:00 UTC. 0: no limit.",
    "daily_tokens_per_server": "Tokens one server or workspace may use a day (replies and "
    "summaries); a server may set lower limits with /config, never higher. 0: no limit.",
    # Restarts and downtime
    "backfill_max_messages": "After downtime (start, gateway or socket reconnect), read back "
    "at most this many missed messages per remembered channel, the newest; they are "
    "remembered, not answered. 0: off.",
    "shutdown_grace_seconds": "On SIGTERM or SIGINT, how long replies in flight may take "
    "before they are given up with an apology. Give the container manager more "
    "(docker-compose.yml: stop_grace_period).",
    "answer_missed_seconds": "A mention whose reply was never delivered (crash, kill, failed "
    "delivery) is answered after the restart if it is younger than this; older ones are "
    "logged. 0: never.",
    "reply_claim_seconds": "How long a process's claim on a mention it is answering lasts "
    "without renewal; after a crash the mention is answered once the claim ran out.",
    # Discord
    "discord_token": "The bot token; starts the Discord adapter.",
    "discord_guild_ids": "Comma-separated server ids whose slash commands are synced at "
    "once. Unset: global commands (they can take a while to appear).",
    "discord_reset_permission": "The Discord permission /reset and /forget require (any "
    "permission name).",
    "shard_count": "Discord sharding: the total number of shards.",
    "shard_ids": "Comma-separated shards this process runs (needs SHARD_COUNT). Unset: all.",
    # Slack
    "slack_bot_token": "The Bot User OAuth Token (xoxb-...); with SLACK_APP_TOKEN or "
    "SLACK_SIGNING_SECRET it starts the Slack adapter.",
    "slack_app_token": "App-level token (xapp-..., connections:write) for Socket Mode: no "
    "public URL needed.",
    "slack_signing_secret": "Signing secret for HTTP mode (events sent to a public URL).",
    "slack_admin_user_ids": "Comma-separated user ids allowed, besides workspace admins and "
    "owners, to /reset, /forget, change /digest and change settings with /config.",
    "host": "Where Slack HTTP mode listens (the container image sets 0.0.0.0).",
    "port": "Slack HTTP mode's port.",
    # Logs and the admin server
    "log_level": "How much is logged. Secrets are scrubbed from every line; tracebacks only "
    "at DEBUG.",
    "log_format": "json: one JSON object per line with the channel and request id.",
    "admin_port": "Port of the admin server (/healthz, /readyz, /metrics, the inspector), "
    "e.g. 9464. Unset: off.",
    "admin_host": "Where the admin server listens (0.0.0.0 to be scraped from another "
    "container).",
    "admin_inspector": "The memory inspector web page (reads and changes memory); needs "
    "ADMIN_PORT and ADMIN_TOKEN.",
    "admin_token": "The inspector's login secret, at least 16 random characters.",
    "summary_history": "Summary versions kept per channel for the inspector's history "
    "(0: none).",
}
