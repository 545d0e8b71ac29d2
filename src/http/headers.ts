/** Headers every answer of the API carries (CONTRACT §7), beside its `x-request-id`. */
export const ANSWER_HEADERS = { 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' } as const
