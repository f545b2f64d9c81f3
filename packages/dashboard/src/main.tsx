import { Backend } from "@pps/crypto"
import { StrictMode } from "react"
import { createRoot } from "react-dom/client"
import { App } from "./App.tsx"
import "./styles.css"

// The WebAssembly backend makes opening amounts fast; the pure one stays active if it cannot load.
void Backend.init().catch(() => undefined)

const root = document.getElementById("root")
if (root !== null) createRoot(root).render(<StrictMode><App /></StrictMode>)
