/**
 * The transfer sealing thread's own module (`TransferSealer.thread` starts it): what it runs
 * and nothing else, so that a thread loads only the crypto package (no Effect runtime, no
 * database): ~0.6 s to start, ~80 MB of resident memory with its mcl-wasm (2-vCPU VM).
 *
 * @since 0.9.0
 */
import { Backend, ElGamal, EncryptionKey, Note } from "@pps/crypto"
import * as ThreadCalls from "@pps/guardian/ThreadCalls"
import { isMainThread, parentPort, workerData } from "node:worker_threads"

/**
 * What a transfer's boxes are sealed for: the context they are bound to, the note, and the
 * three public keys (as registered: EVM encoding x ‖ y, or compressed).
 *
 * @since 0.9.0
 * @category models
 */
export interface SealInput {
  readonly context: Note.TransferContext
  readonly note: Note.TransferNote
  readonly senderKey: Uint8Array
  readonly recipientKey: Uint8Array
  readonly guardianKey: Uint8Array
}

/**
 * The sealing itself, on whichever thread runs it; undefined for a key that does not parse.
 *
 * @since 0.9.0
 */
export const sealHere = (input: SealInput): Note.TransferBoxes | undefined => {
  const senderKey = EncryptionKey.parsePublicKey(input.senderKey)
  const recipientKey = EncryptionKey.parsePublicKey(input.recipientKey)
  const guardianKey = EncryptionKey.parsePublicKey(input.guardianKey)
  if (!senderKey.ok || !recipientKey.ok || !guardianKey.ok) return undefined
  return Note.sealTransfer({
    context: input.context,
    note: input.note,
    opening: ElGamal.newOpening(input.note.amount),
    senderKey: senderKey.value,
    recipientKey: recipientKey.value,
    guardianKey: guardianKey.value
  })
}

/**
 * A call to the thread.
 *
 * @since 0.9.0
 * @category models
 */
export type Call = { readonly kind: "seal"; readonly input: SealInput } | { readonly kind: "close" }

/**
 * Marks the threads `TransferSealer` starts on this module, so that importing it anywhere else
 * (the event loop's inline sealing does) runs nothing.
 *
 * @since 0.9.0
 */
export const threadMarker = "pps-transfer-sealing-thread"

/**
 * The thread, in its errors.
 *
 * @since 0.9.0
 */
export const describe = "the transfer sealing thread"

if (!isMainThread && (workerData as Record<string, unknown> | null)?.[threadMarker] === true) {
  Backend.init({ backend: "mcl" }).then(
    () =>
      ThreadCalls.answerCalls<Call & { readonly id: number }>(
        async (call) => call.kind === "seal" ? sealHere(call.input) ?? null : null,
        (call, stop) => {
          if (call.kind === "close") stop()
        }
      ),
    (error: unknown) => parentPort!.postMessage({ kind: "failed", error: ThreadCalls.toErrorData(error) } satisfies ThreadCalls.Started)
  )
}
