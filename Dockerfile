# syntax=docker/dockerfile:1
# The tutorial in a container, for participants on macOS and Windows (Docker Desktop), or on any
# machine through VS Code's Dev Containers (.devcontainer/devcontainer.json): Debian 12, the
# packages the build and the lessons need, and the project built once, by the quick start's first
# command, ./tutorial tour, run as root where nothing is installed yet. CI runs the same command
# the same way on a pristine Debian 12 (tests/fresh/README.md); this file itself has not been
# built by the project's tests, which have no container runtime.
#
#   docker build -t dist-tutorial .
#   docker run --rm -it dist-tutorial                      # a shell in /root/dist-tutorial
#   docker run --rm -it dist-tutorial ./tutorial check 04  # grade chapter 04's exercises
#
# Capabilities: every lesson and exercise runs with Docker's defaults, except `multinode` (two
# machines as network namespaces). `ip netns add` needs CAP_NET_ADMIN for the virtual cable and
# CAP_SYS_ADMIN for the namespace and its bind mount, and Docker's default AppArmor profile
# refuses those mounts even then, so run that lesson in a privileged container:
#   docker run --rm -it --privileged dist-tutorial ./tutorial run multinode
# Without it the lesson says why and exits 77 (skipped); the tour counts it as skipped.
#
# Behind a proxy, docker build passes http_proxy/https_proxy through (they are predefined build
# arguments): docker build --build-arg http_proxy=$http_proxy --build-arg https_proxy=$https_proxy .
# On a network that inspects TLS, give the build your organisation's CA certificate (a PEM file);
# it goes where Debian keeps local CAs, and the ca-certificates package adds it to the trust store
# when a command installs it (npm, for ./tutorial test or ./tutorial slides, needs it):
#   docker build --secret id=ca,src=/path/to/corporate-ca.crt -t dist-tutorial .
FROM debian:12

RUN --mount=type=secret,id=ca,required=false \
    if [ -s /run/secrets/ca ]; then \
      mkdir -p /usr/local/share/ca-certificates && \
      cp /run/secrets/ca /usr/local/share/ca-certificates/corporate-ca.crt; \
    fi

# git: ./tutorial reset restores an exercise's starter from the repository's history.
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*

COPY . /root/dist-tutorial
WORKDIR /root/dist-tutorial
RUN ./tutorial tour

CMD ["bash"]
