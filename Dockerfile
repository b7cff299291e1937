# pumice's scheduler image: `docker build -t pumice:0.1.0 .` (see deploy/README.md).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# (src/pumice/deploy links to deploy/: the CRDs ship inside the package)
COPY deploy ./deploy
RUN pip install . && rm -rf /src

WORKDIR /
# An unprivileged user; the Deployment runs as the same uid.
USER 65532:65532
ENTRYPOINT ["pumice"]
CMD ["run", "--help"]
