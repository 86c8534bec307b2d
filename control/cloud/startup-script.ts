/**
 * The start-up script an instance boots with: it installs Squid on the proxy port with one
 * login, the instance's own, drawn at random per instance. It is the one place those
 * credentials travel to the cloud (AWS user data, GCP `startup-script` metadata, Azure custom
 * data); no tag, label or other item holds them, so reading the instance list never reads them.
 *
 * The three assignments at the top are the script's interface: the test clouds' stand-in for a
 * boot reads them (testkit/upstreams/cloud-boot.ts) and starts a local proxy with that login.
 */

export interface ProxyLogin {
  username: string;
  password: string;
  port: number;
}

/** Usernames and passwords are drawn from [A-Za-z0-9]: nothing to quote in shell or htpasswd. */
const SAFE = /^[A-Za-z0-9]+$/;

export function startupScript(login: ProxyLogin): string {
  if (!SAFE.test(login.username) || !SAFE.test(login.password)) {
    throw new Error("A proxy login must be letters and digits only");
  }
  return `#!/bin/bash
# Octoprox proxy instance: Squid with one login.
set -euo pipefail
OCTOPROX_PROXY_PORT=${login.port}
OCTOPROX_PROXY_USER=${login.username}
OCTOPROX_PROXY_PASSWORD=${login.password}

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q squid apache2-utils
htpasswd -bc /etc/squid/octoprox.passwd "$OCTOPROX_PROXY_USER" "$OCTOPROX_PROXY_PASSWORD"
chown proxy:proxy /etc/squid/octoprox.passwd
chmod 0400 /etc/squid/octoprox.passwd
cat > /etc/squid/squid.conf <<SQUID
http_port \${OCTOPROX_PROXY_PORT}
auth_param basic program /usr/lib/squid/basic_ncsa_auth /etc/squid/octoprox.passwd
auth_param basic realm octoprox
acl octoprox proxy_auth REQUIRED
http_access allow octoprox
http_access deny all
cache deny all
access_log none
forwarded_for delete
via off
request_header_access X-Forwarded-For deny all
SQUID
systemctl restart squid
systemctl enable squid
`;
}
