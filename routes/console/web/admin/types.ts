// What the admin API answers: the types of its response schemas (routes/admin/answers.ts), the
// same the routes are checked against, imported as types only (nothing of TypeBox reaches the page).

import type { AnswerOf, Call } from '../../../admin/answers.js'

export type {
  AnswerOf, Attempt, Delivery, Key, McpServer, NewKey, OperatorSession, Org, PriceDifference, Provider, QuotaView, Reloaded, Role, Rotation, SummaryRow, UsageRecord, Whoami
} from '../../../admin/answers.js'

/** A call with its attempts, dropped parameters and kept content (GET /usage/{trace_id}). */
export type CallDetail = Call
export type Plugins = AnswerOf<'plugins'>
/** GET /prices/check: the catalog prices that differ from the price database's. */
export type PriceCheck = AnswerOf<'prices'>
