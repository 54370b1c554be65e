# gistbot container image.
#   docker build -t gistbot .
#   docker run -v gistbot-data:/data --env-file .env gistbot
# The builder stage turns the source into a wheel and installs it with the discord, slack
# and postgres extras into /opt/venv; the final stage copies only that venv and the
# tiktoken encodings, so no compiler, pip cache or source tree ships.

FROM python:3.11-slim AS builder
# DL3064 reads "TOKEN" in TIKTOKEN_CACHE_DIR as a secret; it is a folder name.
# hadolint ignore=DL3064
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH \
    TIKTOKEN_CACHE_DIR=/opt/tiktoken
WORKDIR /src
RUN python -m venv /opt/venv
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY bot ./bot
COPY adapters ./adapters
COPY memory ./memory
# The wheel is built from this checkout, so it is pinned by construction; its dependencies
# are pinned by constraints.txt, the versions CI tested.
# hadolint ignore=DL3013
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && pip install -c constraints.txt "$(find /wheels -name 'gistbot-*.whl')[discord,slack,postgres]"
# tiktoken would download its encodings on first use; unpack the copies that ship in
# memory/encodings/ into TIKTOKEN_CACHE_DIR now and prove that loading them needs no network.
RUN python -c "from memory.tokens import ensure_offline_encodings; ensure_offline_encodings()" \
 && python -c "from memory.tokens import TokenCounter; assert TokenCounter('gpt-4o').count('안녕 hi') > 0"

FROM python:3.11-slim
LABEL org.opencontainers.image.title="gistbot" \
      org.opencontainers.image.description="Discord and Slack chat bot with summarizing memory"
# hadolint ignore=DL3064
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TIKTOKEN_CACHE_DIR=/opt/tiktoken \
    DATABASE_URL=sqlite:////data/gistbot.db \
    HOST=0.0.0.0 \
    PORT=3000
# tini is PID 1: it forwards SIGTERM to gistbot (which drains for SHUTDOWN_GRACE_SECONDS,
# then exits 0) and reaps zombies. gistbot also handles SIGTERM itself, so `docker run
# --init` or compose's `init: true` work too. The version is the base image's Debian one.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 gistbot \
 && useradd --system --uid 10001 --gid gistbot --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin gistbot \
 && mkdir /data \
 && chown gistbot:gistbot /data
COPY --from=builder /opt/venv /opt/venv
COPY --from=builder /opt/tiktoken /opt/tiktoken
WORKDIR /app
# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
# SQLite (the default DATABASE_URL) keeps its file and WAL here; mount a volume.
VOLUME /data
# Only Slack HTTP mode listens; Discord and Slack Socket Mode connect out.
EXPOSE 3000
# Healthy = with ADMIN_PORT set, the admin server's /healthz answers 200 (the process and
# its event loop are alive); without it, the settings load and the database opens (and is
# migrated). Both take well under a second; `gistbot doctor` would also call the LLM.
HEALTHCHECK --interval=60s --timeout=15s --start-period=30s --retries=3 \
    CMD ["python", "-m", "bot.admin.healthcheck"]
# docker stop sends this, waits (give it more than SHUTDOWN_GRACE_SECONDS: `docker stop -t
# 30`, compose's stop_grace_period), then SIGKILLs.
STOPSIGNAL SIGTERM
ENTRYPOINT ["tini", "-s", "--"]
# With no platform token set there is no terminal to chat in: it stops at once with status 2
# and one line naming DISCORD_TOKEN / SLACK_BOT_TOKEN (no silent restart loop).
CMD ["gistbot", "run"]
