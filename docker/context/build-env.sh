#!/bin/sh
# Build-time wrapper: run "$@" with the optional BuildKit secrets of an image build, never leaving them in a layer.
#   extra_ca  PEM certificates trusted in addition to the image's CA bundle (e.g. a proxy's CA), for pip only;
#   pip_conf  a pip configuration file (index URLs with credentials belong here, not in build arguments).
# The combined bundle is written to a temporary file that is removed before the RUN step ends.
# Empty PIP_INDEX_URL / PIP_EXTRA_INDEX_URL / PIP_FIND_LINKS build arguments are treated as unset.
set -eu
for var in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_FIND_LINKS; do
    eval "value=\${$var:-}"
    if [ -z "$value" ]; then unset "$var"; fi
done
tmp=""
cleanup() { if [ -n "$tmp" ]; then rm -f "$tmp"; fi; }
trap cleanup EXIT INT TERM
if [ -s /run/secrets/extra_ca ]; then
    tmp=$(mktemp)
    for bundle in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
        if [ -s "$bundle" ]; then cat "$bundle" >>"$tmp"; break; fi
    done
    cat /run/secrets/extra_ca >>"$tmp"
    export PIP_CERT="$tmp"
fi
if [ -s /run/secrets/pip_conf ]; then
    export PIP_CONFIG_FILE=/run/secrets/pip_conf
fi
"$@"
