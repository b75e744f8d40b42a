// The gateway's one rough token count, for where no tokenizer or upstream count is at hand (the
// demo provider, an embedding whose provider reports no usage, a call whose usage never came).

/** About four characters a token, at least one for non-empty text. */
export const estimateTokens = (text: string): number => tokensOfLength(text.length)

/** The same count for text of this many characters (text read in pieces). */
export const tokensOfLength = (chars: number): number => chars === 0 ? 0 : Math.max(1, Math.ceil(chars / 4))
