/**
 * Developers → Webhooks (D33-D35): create with an event picker (the secret is
 * shown once), rotate the secret, delete, read the delivery log with each
 * attempt's status code, retry count and next attempt, and replay an event.
 */
import { Webhook } from "@pps/sdk"
import { type FormEvent, useState } from "react"
import type { PageProps } from "../App.tsx"
import { call } from "../api.ts"
import { When } from "../time.tsx"
import { Empty, ErrorNote, Loading, Page, ShownOnce, useLoad } from "../ui.tsx"

/** The picker offers every type the API accepts (the contract's list, through the SDK). */
const eventTypes = Webhook.eventTypes

interface Subscription {
  readonly webhook_id: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  readonly created_at: string
}

interface Delivery {
  readonly delivery_id: string
  readonly event_id: string
  readonly event: string
  readonly status: string
  readonly response_status_code: number | null
  readonly retry_count: number
  readonly created_at: string
  readonly last_attempt_at: string | null
  readonly next_attempt_at: string | null
}

const Deliveries = ({ webhook }: { readonly webhook: Subscription }) => {
  const log = useLoad(() => call<{ readonly data: ReadonlyArray<Delivery> }>("GET", `/v1/webhooks/${encodeURIComponent(webhook.webhook_id)}/deliveries?limit=20`), [webhook.webhook_id])
  const [note, setNote] = useState<string | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const replay = async (delivery: Delivery) => {
    setError(undefined)
    try {
      const answer = await call<{ readonly delivery_id: string }>("POST", `/v1/webhooks/${encodeURIComponent(webhook.webhook_id)}/replay/${encodeURIComponent(delivery.event_id)}`)
      setNote(`Replay queued as ${answer.delivery_id}.`)
      log.reload()
    } catch (caught) {
      setError(caught)
    }
  }
  return (
    <div>
      <div className="row"><h3>Delivery log</h3><button type="button" className="secondary" onClick={log.reload}>Refresh</button></div>
      {note !== undefined && <p className="success" role="status">{note}</p>}
      <ErrorNote error={error} />
      {log.loading && <Loading what="deliveries" />}
      <ErrorNote error={log.error} />
      {log.value !== undefined && (log.value.data.length === 0 ? <Empty>No deliveries yet.</Empty> : (
        <table>
          <caption className="visually-hidden">Deliveries to {webhook.url}, newest first</caption>
          <thead>
            <tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Response</th><th scope="col">Retries</th><th scope="col">Last attempt</th><th scope="col">Next attempt</th><th scope="col"><span className="visually-hidden">Actions</span></th></tr>
          </thead>
          <tbody>
            {log.value.data.map((d) => (
              <tr key={d.delivery_id} data-testid={`delivery-${d.delivery_id}`}>
                <td>{d.event}<br /><code className="small">{d.event_id}</code></td>
                <td>{d.status}</td>
                <td>{d.response_status_code ?? "—"}</td>
                <td>{d.retry_count}</td>
                <td>{d.last_attempt_at === null ? "—" : <When iso={d.last_attempt_at} />}</td>
                <td>{d.next_attempt_at === null ? "—" : <When iso={d.next_attempt_at} />}</td>
                <td><button type="button" className="secondary" onClick={() => void replay(d)} aria-label={`Replay ${d.event} ${d.event_id}`}>Replay</button></td>
              </tr>
            ))}
          </tbody>
        </table>
      ))}
    </div>
  )
}

export const Webhooks = (_props: PageProps) => {
  const list = useLoad(() => call<{ readonly data: ReadonlyArray<Subscription> }>("GET", "/v1/webhooks"), [])
  const [url, setUrl] = useState("")
  const [events, setEvents] = useState<ReadonlyArray<string>>(["transfer.confirmed"])
  const [secret, setSecret] = useState<{ readonly label: string; readonly value: string } | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [fieldError, setFieldError] = useState<{ readonly param: string | undefined; readonly message: string } | undefined>(undefined)
  const [open, setOpen] = useState<string | undefined>(undefined)

  const create = async (event: FormEvent) => {
    event.preventDefault()
    setError(undefined)
    setFieldError(undefined)
    try {
      const created = await call<{ readonly secret: string; readonly url: string }>("POST", "/v1/webhooks", { url, events })
      setSecret({ label: `Signing secret for ${created.url}`, value: created.secret })
      setUrl("")
      list.reload()
    } catch (caught) {
      const param = caught instanceof Error && "param" in caught && typeof caught.param === "string" ? caught.param : undefined
      setFieldError({ param, message: caught instanceof Error ? caught.message : "The subscription was refused." })
    }
  }
  const rotate = async (webhook: Subscription) => {
    setError(undefined)
    try {
      const rotated = await call<{ readonly secret: string }>("POST", `/v1/webhooks/${encodeURIComponent(webhook.webhook_id)}/rotate-secret`, {})
      setSecret({ label: `New signing secret for ${webhook.url} (the previous one keeps working for a while)`, value: rotated.secret })
    } catch (caught) {
      setError(caught)
    }
  }
  const remove = async (webhook: Subscription) => {
    if (!globalThis.confirm(`Delete the subscription to ${webhook.url}? Pending deliveries are cancelled.`)) return
    setError(undefined)
    try {
      await call("DELETE", `/v1/webhooks/${encodeURIComponent(webhook.webhook_id)}`)
      list.reload()
    } catch (caught) {
      setError(caught)
    }
  }
  return (
    <Page title="Webhooks">
      {secret !== undefined && <ShownOnce label={secret.label} value={secret.value} onDone={() => setSecret(undefined)} />}
      <form onSubmit={(event) => void create(event)} className="panel">
        <h2>New subscription</h2>
        <label htmlFor="webhook-url">Endpoint URL (https)</label>
        <input id="webhook-url" type="url" required value={url} onChange={(event) => setUrl(event.target.value)}
          aria-invalid={fieldError?.param === "url"} aria-describedby={fieldError?.param === "url" ? "webhook-url-error" : undefined} />
        {fieldError?.param === "url" && <p id="webhook-url-error" className="error">{fieldError.message}</p>}
        <fieldset>
          <legend>Events</legend>
          {eventTypes.map((type) => (
            <label key={type} className="check">
              <input type="checkbox" checked={events.includes(type)}
                onChange={(event) => setEvents(event.target.checked ? [...events, type] : events.filter((e) => e !== type))} />
              {type}
            </label>
          ))}
        </fieldset>
        {fieldError !== undefined && fieldError.param !== "url" && <p className="error" role="alert">{fieldError.message}</p>}
        <button type="submit">Create subscription</button>
      </form>
      <ErrorNote error={error} />
      {list.loading && <Loading what="subscriptions" />}
      <ErrorNote error={list.error} />
      {list.value !== undefined && (list.value.data.length === 0 ? <Empty>No subscriptions yet.</Empty> : (
        <ul className="stack">
          {list.value.data.map((webhook) => (
            <li key={webhook.webhook_id} className="panel">
              <p><strong className="wrap">{webhook.url}</strong></p>
              <p className="muted">{webhook.events.join(", ")}</p>
              <div className="row">
                <button type="button" className="secondary" aria-expanded={open === webhook.webhook_id}
                  onClick={() => setOpen(open === webhook.webhook_id ? undefined : webhook.webhook_id)}>Deliveries</button>
                <button type="button" className="secondary" onClick={() => void rotate(webhook)}>Rotate secret</button>
                <button type="button" className="danger" onClick={() => void remove(webhook)}>Delete</button>
              </div>
              {open === webhook.webhook_id && <Deliveries webhook={webhook} />}
            </li>
          ))}
        </ul>
      ))}
    </Page>
  )
}
