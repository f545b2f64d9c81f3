/** WALLET_KEK rotation and backup (D54) on embedded PGlite: the secrets file's flow and the configured one. */
import { walletKekSuite } from "./suites/walletKek.ts"
import { pglite } from "./support/TestServer.ts"

walletKekSuite(pglite)
