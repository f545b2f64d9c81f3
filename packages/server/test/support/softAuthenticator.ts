/**
 * A WebAuthn authenticator in software (ES256, "none" attestation, discoverable),
 * for server tests of the dashboard's passkey ceremonies without a browser: it
 * answers the options the server gives with the JSON a browser would send.
 */
import { createHash, generateKeyPairSync, randomBytes, sign } from "node:crypto"
import { isoCBOR } from "@simplewebauthn/server/helpers"

const b64url = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64url")
const sha256 = (bytes: Uint8Array | string) => createHash("sha256").update(bytes).digest()

export interface SoftAuthenticator {
  readonly credentialId: string
  /** The answer to `navigator.credentials.create` for these options. */
  readonly register: (options: { readonly challenge: string; readonly rp: { readonly id?: string } }, origin: string) => unknown
  /** The answer to `navigator.credentials.get` for these options. */
  readonly authenticate: (options: { readonly challenge: string; readonly rpId?: string }, origin: string) => unknown
}

export const makeSoftAuthenticator = (rpId: string): SoftAuthenticator => {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" })
  const jwk = publicKey.export({ format: "jwk" })
  const credentialId = randomBytes(16)
  let signCount = 0
  const cosePublicKey = isoCBOR.encode(new Map<number, number | Uint8Array>([
    [1, 2], // kty: EC2
    [3, -7], // alg: ES256
    [-1, 1], // crv: P-256
    [-2, Buffer.from(jwk.x ?? "", "base64url")],
    [-3, Buffer.from(jwk.y ?? "", "base64url")]
  ]))
  const authenticatorData = (attested: boolean) => {
    signCount += 1
    const counter = Buffer.alloc(4)
    counter.writeUInt32BE(signCount)
    // Flags: user present (0x01), user verified (0x04), attested credential data (0x40).
    const flags = Buffer.from([attested ? 0x45 : 0x05])
    const head = Buffer.concat([sha256(rpId), flags, counter])
    if (!attested) return head
    const idLength = Buffer.alloc(2)
    idLength.writeUInt16BE(credentialId.length)
    return Buffer.concat([head, Buffer.alloc(16), idLength, credentialId, cosePublicKey])
  }
  const clientData = (type: string, challenge: string, origin: string) =>
    Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }), "utf8")
  return {
    credentialId: b64url(credentialId),
    register: (options, origin) => {
      const attestationObject = isoCBOR.encode(new Map<string, string | Map<string, string> | Uint8Array>([
        ["fmt", "none"],
        ["attStmt", new Map<string, string>()],
        ["authData", authenticatorData(true)]
      ]))
      return {
        id: b64url(credentialId),
        rawId: b64url(credentialId),
        type: "public-key",
        clientExtensionResults: {},
        response: {
          clientDataJSON: b64url(clientData("webauthn.create", options.challenge, origin)),
          attestationObject: b64url(attestationObject),
          transports: ["internal"]
        }
      }
    },
    authenticate: (options, origin) => {
      const data = authenticatorData(false)
      const client = clientData("webauthn.get", options.challenge, origin)
      const signature = sign("sha256", Buffer.concat([data, sha256(client)]), privateKey)
      return {
        id: b64url(credentialId),
        rawId: b64url(credentialId),
        type: "public-key",
        clientExtensionResults: {},
        response: {
          clientDataJSON: b64url(client),
          authenticatorData: b64url(data),
          signature: b64url(signature)
        }
      }
    }
  }
}
