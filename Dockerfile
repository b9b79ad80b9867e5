# Attention Atlas as one container: CPU-only torch, the shipped models, `streamlit run app.py`.
#   docker build -t attention-atlas .
#   docker run --rm -p 8501:8501 attention-atlas          # then open http://localhost:8501
# PORT (default 8501) moves the server; a Hugging Face Space (deploy/huggingface-space.md) uses 8501.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Hugging Face Spaces run the container as uid 1000: the same non-root user here, with its own
# home for the hub cache (models typed in the sidebar are downloaded there).
RUN useradd --create-home --uid 1000 atlas
WORKDIR /app

# Dependencies first (a layer that only changes with requirements.txt). torch comes from the CPU
# index alone (no multi-GB CUDA wheels), at requirements.txt's pin; then the runtime requirements
# (pytest, pytest-xdist and playwright are for the tests only).
COPY requirements.txt ./
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
 && grep -vE '^(pytest|pytest-xdist|playwright)([<>=!~ ]|$)' requirements.txt > /tmp/requirements-runtime.txt \
 && pip install --extra-index-url https://download.pytorch.org/whl/cpu -r /tmp/requirements-runtime.txt \
 && python -c "import torch; assert not torch.version.cuda, torch.version.cuda"

# What the app runs: the script, its packages, the server settings and the two shipped models.
COPY --chown=atlas:atlas app.py ./
COPY --chown=atlas:atlas .streamlit ./.streamlit
COPY --chown=atlas:atlas atlas_ui ./atlas_ui
COPY --chown=atlas:atlas transformer ./transformer
COPY --chown=atlas:atlas viz ./viz
COPY --chown=atlas:atlas pretrained ./pretrained

USER atlas
# One torch thread per translation: a container sees the host's cores (os.cpu_count ignores the
# CPU quota: a Space's "CPU basic" is 2 vCPUs), and on a 2-core machine two threads per translation
# made a click on Translate 1.7x slower under load (benchmarks/bench_first_paint.py, issue 14).
# A public server: the sidebar's hub-id field (and a share link's hub=) opens only these two small
# Marian models (about 300 MB each), never a path (atlas_ui/server/hub_policy.py). `-e ATLAS_HUB=off` turns
# the field off; `-e ATLAS_HUB=any -e ATLAS_HUB_MAX_GB=2` opens any hub model up to 2 GB of files.
ENV HOME=/home/atlas \
    HF_HOME=/home/atlas/.cache/huggingface \
    ATLAS_TORCH_THREADS=1 \
    ATLAS_HUB=allow:Helsinki-NLP/opus-mt-en-de,Helsinki-NLP/opus-mt-de-en \
    PORT=8501
EXPOSE 8501

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD python -c "import os, urllib.request; r = urllib.request.urlopen('http://127.0.0.1:%s/_stcore/health' % os.environ.get('PORT', '8501'), timeout=4); raise SystemExit(r.read().strip() != b'ok')"

# sh -c so that ${PORT:-8501} is expanded; exec so that streamlit is PID 1 and gets SIGTERM.
ENTRYPOINT ["sh", "-c", "exec streamlit run app.py --server.address 0.0.0.0 --server.port ${PORT:-8501} --server.headless true --browser.gatherUsageStats false"]
