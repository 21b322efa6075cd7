/**
 * Readers of the usage LLM APIs report, for `rateLimitedFetch`'s `cost.actual`: each takes a response (a clone:
 * the caller's body is untouched) and resolves with its tokens, or `undefined` when it reports none. A streamed
 * body is read as it arrives, event by event, keeping only the usage seen so far: nothing is buffered whole.
 */

/** Tokens seen so far: the last value of each field reported. */
interface Tally {
  input: number | undefined;
  output: number | undefined;
  total: number | undefined;
}

/**
 * Adds the `usage` of one JSON object to `tally`: a top-level `usage` (OpenAI Chat Completions and Responses,
 * Anthropic Messages), a `message.usage` (Anthropic's `message_start` event) or a `response.usage` (OpenAI
 * Responses' `response.completed` event). `total_tokens` when given; else input (`prompt_tokens` or
 * `input_tokens`) plus output (`completion_tokens` or `output_tokens`). A later report replaces an earlier
 * one field by field (Anthropic's `message_delta` gives the output so far).
 */
function add(tally: Tally, value: unknown): void {
  if (value === null || typeof value !== 'object') return;
  const o = value as { usage?: unknown; message?: { usage?: unknown }; response?: { usage?: unknown } };
  const usage = (o.usage ?? o.message?.usage ?? o.response?.usage) as
    | Record<string, unknown>
    | null
    | undefined;
  if (usage === null || typeof usage !== 'object') return;
  const input = count(usage.prompt_tokens) ?? count(usage.input_tokens);
  const output = count(usage.completion_tokens) ?? count(usage.output_tokens);
  const total = count(usage.total_tokens);
  if (input !== undefined) tally.input = input;
  if (output !== undefined) tally.output = output;
  if (total !== undefined) tally.total = total;
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}

function tokens(tally: Tally): number | undefined {
  if (tally.total !== undefined) return tally.total;
  if (tally.input === undefined && tally.output === undefined) return undefined;
  return (tally.input ?? 0) + (tally.output ?? 0);
}

/** The tokens of a JSON body's `usage` (see the module's comment); `undefined` when it has none or is not JSON. */
export async function jsonUsage(response: Response): Promise<number | undefined> {
  const tally: Tally = { input: undefined, output: undefined, total: undefined };
  try {
    add(tally, await response.json());
  } catch {
    return undefined;
  }
  return tokens(tally);
}

/**
 * The tokens of a server-sent-events body: the usage of its events' `data` (JSON; `[DONE]` and anything else
 * skipped), the last report of each field winning — OpenAI's final chunk (`stream_options.include_usage`), its
 * Responses API's `response.completed`, Anthropic's `message_start` and `message_delta`. Read line by line as
 * the body arrives.
 */
export async function sseUsage(response: Response): Promise<number | undefined> {
  const body = response.body;
  if (body === null) return undefined;
  const tally: Tally = { input: undefined, output: undefined, total: undefined };
  let line = '';
  let data: string[] = [];
  const dispatch = () => {
    if (data.length === 0) return;
    const text = data.join('\n');
    data = [];
    if (!text.includes('usage')) return;
    try {
      add(tally, JSON.parse(text));
    } catch {
      // Not JSON: not a usage report.
    }
  };
  const onLine = (text: string) => {
    if (text === '') dispatch();
    else if (text.startsWith('data:')) data.push(text.slice(text.charCodeAt(5) === 0x20 ? 6 : 5));
  };
  try {
    for await (const chunk of body.pipeThrough(new TextDecoderStream())) {
      line += chunk;
      let end = line.search(/\r\n|\r|\n/);
      while (end >= 0) {
        onLine(line.slice(0, end));
        line = line.slice(line[end] === '\r' && line[end + 1] === '\n' ? end + 2 : end + 1);
        end = line.search(/\r\n|\r|\n/);
      }
    }
  } catch {
    // A broken stream reports what it reported before it broke.
  }
  if (line !== '') onLine(line);
  dispatch();
  return tokens(tally);
}

/** {@link sseUsage} for a `text/event-stream` response, else {@link jsonUsage}. */
export function llmUsage(response: Response): Promise<number | undefined> {
  const type = response.headers.get('content-type') ?? '';
  return type.toLowerCase().startsWith('text/event-stream') ? sseUsage(response) : jsonUsage(response);
}
