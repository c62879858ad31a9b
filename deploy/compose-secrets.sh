#!/bin/sh
# Makes what docker-compose.yml beside this script mounts and reads, in the
# directory given (default: this script's):
#   ca/       a development CA and a certificate per node (n1, n2, n3); keep
#             ca/ca-key.pem to yourself: it makes members
#   secrets/  what the nodes mount: the CA's certificate, each node's
#             certificate and key, and the token file tokens.json
#   tokens/   the tokens (line 1 of each file): ops.token (role admin) for
#             operators, client.token (decide) for callers, join.token for
#             the nodes
#   .env      read by docker compose: the join token, and the group that
#             may read the keys
# Needs limitnode on PATH (go build -o limitnode ./cmd/limitnode).
set -eu
dir=${1:-$(dirname "$0")}
umask 077
cd "$dir"
mkdir -p ca secrets tokens
limitnode certs -dir ca -nodes n1,n2,n3 >/dev/null
limitnode token -name join -roles admin >tokens/join.token
limitnode token -name ops -roles admin >tokens/ops.token
limitnode token -name client -roles decide >tokens/client.token
printf '{"tokens": [%s, %s, %s]}\n' "$(sed -n 2p tokens/join.token)" \
  "$(sed -n 2p tokens/ops.token)" "$(sed -n 2p tokens/client.token)" >secrets/tokens.json
for n in n1 n2 n3; do cp "ca/$n.pem" "ca/$n-key.pem" secrets/; done
cp ca/ca.pem secrets/
# The nodes run as the image's user; the compose file adds them to this
# group, which alone (besides you) may read what they mount.
chmod 0750 secrets && chmod 0640 secrets/*
printf 'LIMITNODE_JOIN_TOKEN=%s\nLIMITNODE_SECRETS_GID=%s\n' "$(sed -n 1p tokens/join.token)" "$(id -g)" >.env
