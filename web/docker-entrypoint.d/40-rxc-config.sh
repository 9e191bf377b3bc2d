#!/bin/sh
# Writes the console's runtime configuration before nginx starts (run by the nginx image's
# /docker-entrypoint.sh). Output, all in RXC_CONFIG_DIR (a writable folder, so the root
# filesystem can stay read-only):
#   config.js        window.__APP_CONFIG__ for the SPA, served by nginx at /config.js
#   api-origin.conf  the API origin, which nginx puts in the CSP's connect-src
#   listen.conf      listen directives: IPv4, plus IPv6 only where the host has it
# Every value is checked against a whitelist of characters: anything else stops the container,
# because these strings end up inside a script and an nginx config.
set -eu
LC_ALL=C
export LC_ALL

die() {
	printf '40-rxc-config: %s\n' "$*" >&2
	exit 1
}

out_dir=${RXC_CONFIG_DIR:-/tmp/rxc}
port=${RXC_LISTEN_PORT:-8000}
if_inet6=${RXC_IF_INET6:-/proc/net/if_inet6}
url=${VITE_API_BASE_URL-http://localhost:5009/api}
chat=${VITE_ANALYTICS_AI_CHAT_ENABLED-false}

url_hint='VITE_API_BASE_URL must be an http:// or https:// URL of the control plane, e.g. https://rxc.example.com/api, without spaces, quotes, query or fragment'

case $chat in
true | false) ;;
*) die "VITE_ANALYTICS_AI_CHAT_ENABLED must be 'true' or 'false'" ;;
esac

case $port in
'' | *[!0-9]* | 0*) die "RXC_LISTEN_PORT must be a port number" ;;
esac
[ "${#port}" -le 5 ] && [ "$port" -le 65535 ] || die "RXC_LISTEN_PORT must be a port number"

[ "${#url}" -le 2048 ] || die "$url_hint (value too long)"
case $url in
http://*) scheme=http rest=${url#http://} ;;
https://*) scheme=https rest=${url#https://} ;;
*) die "$url_hint" ;;
esac

authority=${rest%%/*}
path=${rest#"$authority"}

case $authority in
\[*) # IPv6 literal: [hex:colons], optionally :port
	host=${authority%%]*}]
	inner=${host#\[}
	inner=${inner%]}
	case $inner in '' | *[!0-9A-Fa-f:.]*) die "$url_hint (bad IPv6 address)" ;; esac
	hport=${authority#"$host"}
	case $hport in '' | :*) ;; *) die "$url_hint" ;; esac
	;;
*)
	host=${authority%%:*}
	hport=${authority#"$host"}
	case $host in '' | *[!A-Za-z0-9.-]* | [.-]* | *[.-]) die "$url_hint (bad host name)" ;; esac
	;;
esac

if [ -n "$hport" ]; then
	p=${hport#:}
	case $p in '' | *[!0-9]* | 0*) die "$url_hint (bad port)" ;; esac
	[ "${#p}" -le 5 ] && [ "$p" -le 65535 ] || die "$url_hint (bad port)"
fi

case $path in *[!A-Za-z0-9._~/-]*) die "$url_hint (bad path)" ;; esac

# The SPA appends /api itself: drop trailing slashes and one trailing /api segment.
strip_slashes() {
	while :; do
		case $path in */) path=${path%/} ;; *) break ;; esac
	done
}
strip_slashes
case $path in */api) path=${path%/api} ;; esac
strip_slashes

base="$scheme://$authority$path"
origin="$scheme://$authority"

mkdir -p "$out_dir" 2>/dev/null || die "cannot create $out_dir: mount a writable volume there (e.g. --tmpfs /tmp)"
[ -w "$out_dir" ] || die "$out_dir is not writable: mount a writable volume there (e.g. --tmpfs /tmp)"

write() { # write NAME: stdin to NAME in out_dir, atomically
	tmp="$out_dir/.$1.$$"
	cat >"$tmp" || die "cannot write $out_dir/$1"
	mv -f "$tmp" "$out_dir/$1" || die "cannot write $out_dir/$1"
}

printf 'window.__APP_CONFIG__ = {"apiBaseUrl":"%s","analyticsAiChatEnabled":%s};\n' "$base" "$chat" | write config.js

printf 'map $host $rxc_api_origin {\n    default "%s";\n}\n' "$origin" | write api-origin.conf

if [ -s "$if_inet6" ]; then
	printf 'listen %s;\nlisten [::]:%s;\n' "$port" "$port" | write listen.conf
	ipv6=yes
else
	printf 'listen %s;\n' "$port" | write listen.conf
	ipv6=no
fi

printf '40-rxc-config: apiBaseUrl=%s analyticsAiChatEnabled=%s ipv6=%s (written to %s)\n' "$base" "$chat" "$ipv6" "$out_dir"
