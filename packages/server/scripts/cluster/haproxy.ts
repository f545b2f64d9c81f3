/**
 * The deployment's load balancer: HAProxy (2.6, Debian's package for `npm run cluster`, the
 * official image in docker-compose.yml), configured by one rendering of the topology
 * (`renderHaproxyConfig`), so both run the same configuration with their own addresses:
 *
 * - **TLS termination** on the public port with the deployment's certificate and key (one PEM
 *   file, HAProxy's format); TLS 1.2 at least; HTTP/1.1 to clients and to the api nodes.
 * - **Health checks**: `GET /readyz` on every api node each second; a node is taken out after
 *   two failed checks or at once on a refused connection (`observe layer4`), and back at the
 *   first passing check. `/healthz` on the balancer itself answers 200 while one node is in,
 *   503 otherwise: on the public port, and in plain HTTP on a loopback port for the
 *   orchestrator's probe.
 * - **`X-Forwarded-For`** carries the client's address to the api nodes (whose
 *   `TRUSTED_PROXIES` names the balancer, so only its entry is believed), and
 *   `X-Forwarded-Proto: https`.
 * - **Keep-alive** to the api nodes: a request rides any idle connection to its node, whichever
 *   client left it (`http-reuse always`: clients that send one request per connection would
 *   otherwise cost the node a TCP connection each). HAProxy closes idle ones after 1 to 2 s
 *   (`pool-purge-delay`), before the node's own 5 s keep-alive limit, so a request rarely
 *   meets a connection the node is closing; one that does is answered the 503 below.
 * - **What it may resend**: a request whose connection to a node failed goes to another node
 *   (`option redispatch`, `retry-on conn-failure`: no byte reached the first). A request that
 *   reached a node which then failed is never resent: the client gets 503
 *   `service_unavailable` with `Retry-After` in D1's envelope and retries with its
 *   Idempotency-Key (D6), the only safe judge of whether the first attempt took effect. Every
 *   answer HAProxy makes itself (502, 503, 504) is that 503.
 * - **`X-Served-By`** names the node that answered, for operators and the fault harness.
 * - **Logs** to stdout: only what went wrong (a retry, a redispatch, an error, a cut
 *   connection), with the request id of an answer HAProxy made, and node state changes; the
 *   api nodes log every request themselves.
 */
import * as fs from "node:fs"
import * as path from "node:path"

/** One api node behind the balancer. */
export interface Upstream {
  readonly name: string
  readonly host: string
  readonly port: number
}

/** What the configuration needs: everything that differs between compose and a machine. */
export interface BalancerSettings {
  /** The interface the public port binds: 0.0.0.0 in a container, 127.0.0.1 on a machine. */
  readonly bindHost: string
  /** The public TLS port. */
  readonly port: number
  /** A plain-HTTP port on 127.0.0.1 answering `/healthz` only, for the orchestrator's probe. */
  readonly healthPort: number
  /** The certificate followed by its private key, PEM (HAProxy reads both from one file). */
  readonly pemFile: string
  readonly upstreams: ReadonlyArray<Upstream>
  /**
   * A DNS server to resolve upstream host names from while running (Docker's embedded one,
   * `127.0.0.11:53`), so that a node whose container is recreated with another address is
   * found again; undefined when the upstreams are addresses.
   */
  readonly resolver: string | undefined
  /**
   * The address the balancer connects to the api nodes from, when it is given one: on a
   * machine, a loopback address of its own, so the nodes' TRUSTED_PROXIES can name the balancer
   * alone rather than every local process. Undefined: the system's choice (compose).
   */
  readonly sourceAddress: string | undefined
}

/** What a client is told to wait before retrying when no node could answer. */
export const retryAfterSeconds = 1

/** Health checks: every second, out after two failures (one on a refused connection), back after one success. */
const checkEveryMs = 1_000

/**
 * D1's envelope for the answers HAProxy makes itself; its request id is HAProxy's unique id
 * (`req_` and 32 hex digits), also sent as `X-Request-Id`.
 */
const unavailableBody = JSON.stringify({
  error: {
    code: "service_unavailable",
    message: "No api node could answer; retry with the same Idempotency-Key.",
    request_id: "%[unique-id]"
  }
})

/** The status HAProxy answers by itself when no node answered: each becomes D1's 503. */
const ownErrorStatuses = [502, 503, 504] as const

/** HAProxy's configuration for these settings. */
export const renderHaproxyConfig = (settings: BalancerSettings): string => {
  if (settings.upstreams.length === 0) throw new Error("the balancer needs at least one api node")
  const resolvers = settings.resolver === undefined ? [] : [
    "# Upstream names are resolved while running, so a recreated container's new address is found.",
    "resolvers deployment",
    `  nameserver dns ${settings.resolver}`,
    "  hold valid 10s",
    ""
  ]
  const serverOptions = settings.resolver === undefined ? "" : " resolvers deployment init-addr last,libc,none"
  return [
    "# GENERATED from packages/server/scripts/cluster/topology.ts by haproxy.ts (see its header for why",
    "# each setting is there); compose.ts writes deploy/haproxy.cfg, `npm run cluster` its own copy.",
    "global",
    "  log stdout format raw local0 info",
    "  maxconn 4096",
    "  ssl-default-bind-options ssl-min-ver TLSv1.2",
    "",
    "defaults",
    "  mode http",
    "  log global",
    "  # HAProxy's HTTP log format, then the request id of an answer it made itself (`req_…`).",
    "  log-format \"%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %CC %CS %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq %hr %hs %{+Q}r %ID\"",
    "  option dontlog-normal",
    "  option http-keep-alive",
    "  http-reuse always",
    "  option forwardfor",
    "  # A failed connection (nothing sent) is retried on another node; nothing else is resent.",
    "  retry-on conn-failure",
    "  retries 2",
    "  option redispatch 1",
    "  timeout connect 1s",
    "  timeout http-request 10s",
    "  # Above the api's longest wait (POST /v1/transfers, 5 s) and the event stream's 15 s heartbeat.",
    "  timeout client 65s",
    "  timeout server 65s",
    "  timeout http-keep-alive 10s",
    "  timeout queue 5s",
    "  timeout check 2s",
    "  unique-id-format req_%[uuid,regsub(-,,g)]",
    ...ownErrorStatuses.map((status) =>
      `  http-error status ${status} content-type application/json lf-string '${unavailableBody}' ` +
      `hdr Retry-After ${retryAfterSeconds} hdr X-Request-Id %[unique-id]`
    ),
    "",
    ...resolvers,
    "frontend public",
    `  bind ${settings.bindHost}:${settings.port} ssl crt ${settings.pemFile} alpn http/1.1`,
    "  monitor-uri /healthz",
    "  monitor fail if { nbsrv(api) eq 0 }",
    "  http-request set-header X-Forwarded-Proto https",
    "  # What HAProxy answers itself when no node answered is D1's 503 with Retry-After.",
    "  http-after-response set-status 503 if { status 502 } || { status 504 }",
    "  default_backend api",
    "",
    "frontend health",
    `  bind 127.0.0.1:${settings.healthPort}`,
    "  monitor-uri /healthz",
    "  monitor fail if { nbsrv(api) eq 0 }",
    "  http-request deny deny_status 404",
    "",
    "backend api",
    "  balance roundrobin",
    ...(settings.sourceAddress === undefined ? [] : [`  source ${settings.sourceAddress}`]),
    "  option httpchk",
    "  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host balancer",
    "  http-check expect status 200",
    `  default-server check inter ${checkEveryMs} fall 2 rise 1 observe layer4 error-limit 1 on-error mark-down pool-purge-delay 1s`,
    "  http-response set-header X-Served-By %[srv_name]",
    ...settings.upstreams.map((upstream) => `  server ${upstream.name} ${upstream.host}:${upstream.port}${serverOptions}`),
    ""
  ].join("\n")
}

/**
 * The HAProxy program: `HAPROXY_BIN`, else Debian's `/usr/sbin/haproxy` (not on a user's PATH),
 * else `haproxy` from PATH.
 */
export const haproxyBinary = (): string => {
  const configured = process.env["HAPROXY_BIN"]
  if (configured !== undefined && configured !== "") return configured
  return fs.existsSync("/usr/sbin/haproxy") ? "/usr/sbin/haproxy" : "haproxy"
}

/** The arguments that run HAProxy in the foreground on a configuration file (`-db`: no daemon). */
export const haproxyArguments = (configFile: string): ReadonlyArray<string> => ["-db", "-f", configFile]

/** Writes the configuration (mode 0600: it names the certificate's path and the topology). */
export const writeHaproxyConfig = (file: string, settings: BalancerSettings): void => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, renderHaproxyConfig(settings), { mode: 0o600 })
}
