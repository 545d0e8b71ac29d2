/**
 * CONTRACT §7's bounds on a client, the same on the API's listener and the management one: the
 * whole request within 10 s, its headers within 5 s (408 past either). Node checks them every
 * 30 s by default, so they would fire up to 30 s late; every half second, they fire within the
 * contract's second even on a busy machine.
 */
export const LISTENER_TIMEOUTS = { requestTimeout: 10_000, headersTimeout: 5_000, connectionsCheckingInterval: 500 } as const
