# One image for the three ioparallax exporters (and the Stargate and guest simulators, for the demo
# profile).
# Choose the program with the container command, e.g. `stargate-exporter --config.file=...`.
FROM python:3.11-slim-bookworm

# Run as an unprivileged user; the exporters need no root (the fio exporter's guest disk facts
# only read /sys).
RUN useradd --system --uid 65532 --home /nonexistent ioparallax
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY ioparallax ./ioparallax
# ioparallax/shipped/ links to these two: the installed package holds the rules and dashboards.
COPY alerts ./alerts
COPY dashboards ./dashboards
# The git commit the image is built from, for --version and <exporter>_build_info (no .git in the
# image): `docker-compose build --build-arg REVISION=$(git rev-parse HEAD)`, or IOPARALLAX_REVISION.
ARG REVISION=unknown
RUN printf '%s\n' "$REVISION" > ioparallax/REVISION && pip install --no-cache-dir . && rm -rf /src \
    && mkdir -p /var/lib/guests && chown 65532 /var/lib/guests
# /var/lib/guests: the demo's guest simulator writes there (a named volume takes this owner).
USER 65532
EXPOSE 9761 9762 9763 9764 9765
ENTRYPOINT []
CMD ["stargate-exporter", "--help"]
