#!/bin/sh
# Creates the private CA and the server certificates deploy/compose.yaml
# mounts for TLS between the services: nats.crt (clients and the cluster's
# routes, which verify each other) and postgres.crt. Needs openssl.
#
#   deploy/tls/make-certs.sh [DIR]     # DIR defaults to this script's folder
#
# An existing CA is kept (only missing certificates are issued), so running it
# again never invalidates what clients already trust; delete the folder's
# *.crt and *.key to start over. Keys are written 0600.
set -eu

dir=${1:-$(dirname "$0")}
days_ca=3650
days=825
mkdir -p "$dir"
cd "$dir"
umask 077

if [ ! -f ca.key ]; then
	openssl ecparam -name prime256v1 -genkey -noout -out ca.key.tmp
	openssl req -x509 -new -key ca.key.tmp -sha256 -days "$days_ca" -subj "/O=RXC/CN=RXC compose internal CA" \
		-addext "basicConstraints=critical,CA:TRUE,pathlen:0" -addext "keyUsage=critical,keyCertSign,cRLSign" \
		-out ca.crt
	mv ca.key.tmp ca.key
	chmod 0644 ca.crt
	echo "created CA ca.crt"
fi

# issue NAME SANS EKU
issue() {
	[ -f "$1.crt" ] && [ -f "$1.key" ] && { echo "kept $1.crt"; return; }
	openssl ecparam -name prime256v1 -genkey -noout -out "$1.key"
	openssl req -new -key "$1.key" -subj "/O=RXC/CN=$1" -out "$1.csr"
	printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=%s\nsubjectAltName=%s\n' "$3" "$2" >"$1.ext"
	openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days "$days" -extfile "$1.ext" -out "$1.crt"
	rm -f "$1.csr" "$1.ext" ca.srl
	chmod 0644 "$1.crt"
	echo "issued $1.crt"
}

issue nats "DNS:nats-1,DNS:nats-2,DNS:nats-3,DNS:localhost,IP:127.0.0.1" "serverAuth,clientAuth"
issue postgres "DNS:postgres,DNS:localhost,IP:127.0.0.1" "serverAuth"
