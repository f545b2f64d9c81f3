/**
 * D68: the guardian's key refusal (`sender_key_not_registered`, `recipient_key_not_registered`)
 * told apart. When the party's key-holder (the party, or an agent's owner) has another key
 * registered on chain in this contract than the one the transfer was sealed to, a rotation was
 * mined that this node has not recorded or heard yet: a rotation cut off before its end (the
 * owner's same request finishes it, KeyRotations.ts) or a node that missed the broadcast (D55).
 * That is a state that passes: 503, retry. Any other key refusal remains a broken invariant
 * (authorize.ts answers it 500).
 *
 * @since 0.14.0
 */
import type { Domain as GuardianDomain } from "@pps/guardian"
import { Effect, Option } from "effect"
import { bytesToHex, getAddress } from "viem"
import type { Account } from "@pps/api/Accounts"
import { ServiceUnavailable } from "@pps/api/Errors"
import type { PreparedTransfer, TransfersContext } from "./context.ts"

/** The account and the key a key refusal is about, if the decision is one. */
const refusedParty = (prepared: PreparedTransfer, decision: GuardianDomain.AuthorizeResult) => {
  if (decision._tag !== "Refused") return undefined
  if (decision.reason === "sender_key_not_registered") return { account: prepared.sender, key: prepared.fromKey }
  if (decision.reason !== "recipient_key_not_registered" || prepared.recipient.account === null || prepared.toKey === null) return undefined
  return { account: prepared.recipient.account, key: prepared.toKey }
}

/** Whether the chain registers another key for the party's key-holder than `key`. */
const keyBehindChain = (context: TransfersContext, prepared: PreparedTransfer, party: { readonly account: Account; readonly key: Uint8Array }) =>
  Effect.gen(function*() {
    const holder = party.account.ownerAccountId === null
      ? Option.some(party.account)
      : yield* context.accounts.get(party.account.ownerAccountId)
    const chain = context.settlement.chain(prepared.mode)
    if (Option.isNone(holder) || Option.isNone(chain)) return false
    const registered = yield* context.keys.keyOfAddressIn(chain.value, prepared.contract, getAddress(holder.value.walletAddress))
    return Option.isSome(registered) && bytesToHex(registered.value) !== bytesToHex(party.key)
  })

/**
 * Fails with 503 when the decision is a key refusal that a recorded-later rotation explains;
 * otherwise does nothing (the refusal is answered as before). A failed read is a 503 as well:
 * the refusal cannot be told apart now.
 *
 * @since 0.14.0
 * @category steps
 */
export const rotationUnfinished = (context: TransfersContext, prepared: PreparedTransfer, decision: GuardianDomain.AuthorizeResult) =>
  Effect.suspend(() => {
    const party = refusedParty(prepared, decision)
    if (party === undefined) return Effect.void
    return keyBehindChain(context, prepared, party).pipe(
      Effect.catch((error) => Effect.logWarning("key refusal: the chain's registry could not be read", error).pipe(Effect.as(true))),
      Effect.flatMap((behind) =>
        behind
          ? Effect.logWarning("guardian refused a key a rotation replaced; retry").pipe(
            Effect.annotateLogs({ transfer_id: prepared.transferId }),
            Effect.andThen(Effect.fail(ServiceUnavailable.of("A party's encryption key rotation is not finished; retry shortly.")))
          )
          : Effect.void
      )
    )
  })
