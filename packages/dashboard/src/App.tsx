/**
 * The dashboard shell: who is signed in, the holder's key (in memory once
 * unlocked), the navigation, and which page the address shows.
 */
import type { EncryptionKey } from "@pps/crypto"
import { type MouseEvent, type ReactNode, useCallback, useEffect, useMemo, useState } from "react"
import { call, type Session, setCsrfToken, setSessionEndedHandler } from "./api.ts"
import { Agents } from "./pages/Agents.tsx"
import { ApiKeysPage } from "./pages/ApiKeys.tsx"
import { Approvals } from "./pages/Approvals.tsx"
import { Overview } from "./pages/Overview.tsx"
import { Settings } from "./pages/Settings.tsx"
import { Enroll, SignIn } from "./pages/SignIn.tsx"
import { Transfers } from "./pages/Transfers.tsx"
import { Webhooks } from "./pages/Webhooks.tsx"
import { browserTimeZone, chosenTimeZone, storeTimeZone, TimeZoneContext, type TimeZoneSetting } from "./time.tsx"
import { Loading, Page } from "./ui.tsx"

const base = "/dashboard"

/**
 * The unlocked key is dropped after this long without the holder touching the
 * page (keyboard, pointer): the server's idle limit for sessions, so a screen
 * left open does not keep the key in memory after the session would have ended.
 */
const keyIdleMs = 30 * 60 * 1000
const activityEvents = ["pointerdown", "keydown"] as const

const sections = [
  { path: "/", label: "Overview" },
  { path: "/transfers", label: "Transfers" },
  { path: "/developers/api-keys", label: "API keys" },
  { path: "/developers/webhooks", label: "Webhooks" },
  { path: "/agents", label: "Agents" },
  { path: "/approvals", label: "Approvals" },
  { path: "/settings", label: "Settings" }
] as const

/** The page's route: the path under /dashboard, without a trailing slash ("/" for the overview). */
const routeOf = () => {
  const path = globalThis.location.pathname.slice(base.length).replace(/\/+$/, "")
  return path === "" ? "/" : path
}

/** A transfer's own page: /transfers/<id>. */
const transferRoute = /^\/transfers\/([^/]+)$/

/** Whether a route names a page of the dashboard (others get the not-found page). */
const isKnownRoute = (route: string) => sections.some((s) => s.path === route) || transferRoute.test(route)

const NotFound = ({ route, navigate }: { readonly route: string; readonly navigate: (path: string) => void }) => (
  <Page title="Page not found">
    <p>There is no page at <code>{`${base}${route}`}</code>. The address may be mistyped, or the page has moved.</p>
    <p>
      <a href={`${base}/`} onClick={(event) => { event.preventDefault(); navigate("/") }}>Go to the overview</a>
    </p>
  </Page>
)

/** What `GET /dashboard/api/session-state` answers: 200 whether or not a session is live. */
type SessionState = { readonly signed_in: false } | ({ readonly signed_in: true } & Session)

/** What every page gets: the session, the key (if unlocked) and navigation. */
export interface PageProps {
  readonly session: Session
  readonly keyPair: EncryptionKey.KeyPair | undefined
  readonly navigate: (path: string) => void
}

export const App = () => {
  const [route, setRoute] = useState(routeOf)
  const [session, setSession] = useState<Session | null | undefined>(undefined)
  const [keyPair, setKeyPair] = useState<EncryptionKey.KeyPair | undefined>(undefined)
  const [chosenZone, setChosenZone] = useState<string | undefined>(chosenTimeZone)
  const timeZone = useMemo<TimeZoneSetting>(() => ({
    zone: chosenZone ?? browserTimeZone(),
    chosen: chosenZone,
    choose: (zone) => {
      storeTimeZone(zone)
      setChosenZone(zone)
    }
  }), [chosenZone])

  const navigate = useCallback((path: string) => {
    globalThis.history.pushState(null, "", `${base}${path}`)
    setRoute(path)
    globalThis.scrollTo(0, 0)
  }, [])

  useEffect(() => {
    const onPop = () => setRoute(routeOf())
    globalThis.addEventListener("popstate", onPop)
    return () => globalThis.removeEventListener("popstate", onPop)
  }, [])

  const loadSession = useCallback(() => {
    // Not signed in is an answer here, not an error (no 401 in the browser's console).
    call<SessionState>("GET", "/dashboard/api/session-state").then(
      (state) => {
        setCsrfToken(state.signed_in ? state.csrf_token : undefined)
        setSession(state.signed_in ? state : null)
      },
      () => {
        setCsrfToken(undefined)
        setSession(null)
      }
    )
  }, [])
  useEffect(loadSession, [loadSession])

  // A 401 on any session request: the session is over; nothing of it stays on screen.
  useEffect(() => {
    setSessionEndedHandler(() => {
      setKeyPair(undefined)
      setSession(null)
    })
    return () => setSessionEndedHandler(() => {})
  }, [])

  useEffect(() => {
    if (keyPair === undefined) return
    let timer = globalThis.setTimeout(() => setKeyPair(undefined), keyIdleMs)
    const restart = () => {
      globalThis.clearTimeout(timer)
      timer = globalThis.setTimeout(() => setKeyPair(undefined), keyIdleMs)
    }
    for (const name of activityEvents) globalThis.addEventListener(name, restart, { passive: true })
    return () => {
      globalThis.clearTimeout(timer)
      for (const name of activityEvents) globalThis.removeEventListener(name, restart)
    }
  }, [keyPair])

  useEffect(() => {
    const title = isKnownRoute(route) ? sections.find((s) => s.path === route)?.label ?? "Transfer" : "Page not found"
    document.title = `${title} · Private Payments`
  }, [route])

  const withZone = (children: ReactNode) => <TimeZoneContext.Provider value={timeZone}>{children}</TimeZoneContext.Provider>
  if (session === undefined) return <main id="main"><Loading what="your session" /></main>
  if (route.startsWith("/enroll")) {
    return <Enroll onSignedIn={() => { navigate("/"); loadSession() }} />
  }
  if (session === null) return <SignIn onSignedIn={loadSession} />

  const link = (path: string) => (event: MouseEvent<HTMLAnchorElement>) => {
    event.preventDefault()
    navigate(path)
  }
  const props: PageProps = { session, keyPair, navigate }
  const active = !isKnownRoute(route) ? undefined : route === "/" ? "/" : sections.find((s) => s.path !== "/" && route.startsWith(s.path))?.path

  const page = (() => {
    if (route === "/transfers" || transferRoute.test(route)) return <Transfers {...props} transferId={transferRoute.exec(route)?.[1]} />
    if (route === "/developers/api-keys") return <ApiKeysPage {...props} />
    if (route === "/developers/webhooks") return <Webhooks {...props} />
    if (route === "/agents") return <Agents {...props} />
    if (route === "/approvals") return <Approvals {...props} />
    if (route === "/settings") return <Settings {...props} onKey={setKeyPair} onSignedOut={() => { setKeyPair(undefined); setCsrfToken(undefined); navigate("/"); setSession(null) }} />
    if (route === "/") return <Overview {...props} />
    return <NotFound route={route} navigate={navigate} />
  })()

  return withZone(
    <div className="shell">
      <a className="skip" href="#main">Skip to content</a>
      <header className="top">
        <span className="brand">Private Payments</span>
        <span className="who">
          {session.handle} · <span className={`mode mode-${session.mode}`}>{session.mode === "test" ? "Test mode" : "Live mode"}</span>
          {" · "}
          <span data-testid="key-state">{keyPair === undefined ? "Key locked" : "Key unlocked"}</span>
          {" · "}
          <span data-testid="time-zone">Times in {timeZone.zone}</span>
        </span>
      </header>
      <nav aria-label="Sections">
        <ul>
          {sections.map((section) => (
            <li key={section.path}>
              <a href={`${base}${section.path}`} onClick={link(section.path)} aria-current={active === section.path ? "page" : undefined}>
                {section.label}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main">{page}</main>
    </div>
  )
}
