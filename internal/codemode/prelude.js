// The prelude runs in every fresh runtime before the code. Go calls it with
// h: the size caps, the tool names and a few Go functions. It removes what
// code mode does not offer, puts size guards on the built-ins that could
// otherwise allocate or loop without bound inside one native step (where
// goja's interrupt cannot reach), and defines console and tools. It keeps
// its own references to the original built-ins, so later changes the code
// makes to globals or prototypes only affect the code itself.
(function (h) {
  "use strict";
  const G = globalThis;
  const O = Object, A = Array, S = String;
  const apply = Reflect.apply;
  const defineProperty = O.defineProperty, getPrototypeOf = O.getPrototypeOf;
  const getOwnPropertyDescriptor = O.getOwnPropertyDescriptor, ownKeys = Reflect.ownKeys;
  const create = O.create, freeze = O.freeze, isArray = A.isArray;
  const jsonStringify = JSON.stringify, jsonParse = JSON.parse;
  const ErrorC = Error, RangeErrorC = RangeError, TypeErrorC = TypeError, EvalErrorC = EvalError;
  const MapC = Map, SetC = Set, WeakMapC = WeakMap;
  const wmGet = WeakMap.prototype.get, wmSet = WeakMap.prototype.set;
  const mapEntries = Map.prototype.entries, setValues = Set.prototype.values;
  const mapGet = Map.prototype.get, mapSet = Map.prototype.set;
  const arrayFrom = A.from, arrayJoin = A.prototype.join, arrayPush = A.prototype.push;
  const arraySlice = A.prototype.slice;
  const strIndexOf = S.prototype.indexOf, strSlice = S.prototype.slice, strValueOf = S.prototype.valueOf;
  const strCharCodeAt = S.prototype.charCodeAt;
  const ProxyC = Proxy, RegExpC = RegExp, reflectGet = Reflect.get, plainArray = h.plainArray;
  const floor = Math.floor;
  const symIterator = Symbol.iterator, symReplace = Symbol.replace, symSplit = Symbol.split, symMatch = Symbol.match;

  const MAX_STR = h.maxStr, MAX_ELEMS = h.maxElems, MAX_KEYS = h.maxKeys;
  const MAX_DEPTH = h.maxDepth, MAX_ARGS = h.maxArgs, MAX_FLAT = 100, MAX_OUT = h.maxOutput;
  const proxyTarget = h.target, jsonDepth = h.jsonDepth, jsonSize = h.jsonSize, overflow = h.overflow, scan = h.scan, emit = h.emit, hostCall = h.call, explain = h.explain;

  function refuse(what, n, max, unit) {
    throw new RangeErrorC(what + ": " + n + " " + unit + " is over the code-mode limit of " + max);
  }
  function toLength(v) {
    const n = +v;
    if (!(n > 0)) return 0;
    return n > 9007199254740991 ? 9007199254740991 : floor(n);
  }
  function def(obj, key, value) {
    defineProperty(obj, key, { value: value, writable: true, enumerable: false, configurable: true });
  }
  const wrapped = new MapC(); // original function -> its guarded replacement
  function replace(obj, key, make) {
    const orig = obj[key];
    if (typeof orig !== "function") return;
    let w = wrapped.get(orig);
    if (w === undefined) {
      w = make(orig);
      defineProperty(w, "name", { value: orig.name, configurable: true });
      defineProperty(w, "length", { value: orig.length, configurable: true });
      wrapped.set(orig, w);
    }
    def(obj, key, w);
  }
  function lengthOf(o) {
    return o === null || o === undefined ? 0 : toLength(o.length);
  }
  // pinned is o with its length read as len, the length a guard checked:
  // an array-like's length getter (or a Proxy's trap) could answer 1 to
  // the guard and 1e9 to the built-in (Array.prototype.fill.call({get
  // length() {...}}, 0) set 1e9 properties in one step). An Array's length
  // is a data property, so an Array (not a Proxy of one) is passed as is.
  function pinned(o, len) {
    if (o === null || typeof o !== "object" && typeof o !== "function" || plainArray(o)) return o;
    return new ProxyC(o, { get(t, k) { return k === "length" ? len : apply(reflectGet, undefined, [t, k]); } });
  }
  function thisObject(v, what) {
    if (v === null || v === undefined) throw new TypeErrorC(what + " called on null or undefined");
    return O(v);
  }
  function checkElems(what, n) {
    if (n > MAX_ELEMS) refuse(what, n, MAX_ELEMS, "elements");
  }
  function checkChars(what, n) {
    if (n > MAX_STR) refuse(what, n, MAX_STR, "characters");
  }
  // strLen is the length of a string or String object, else 0.
  function strLen(v) {
    if (typeof v === "string") return v.length;
    if (typeof v === "object" && v !== null) {
      try { return apply(strValueOf, v, []).length; } catch (e) { return 0; }
    }
    return 0;
  }
  // checkKeys refuses a string or an array with more than MAX_KEYS keys:
  // one property (Object.keys: a string each; entries: an array each) per
  // character or element, made in one native step (Object.entries of an
  // array of 4 million elements allocated 3.4 GB in 11 s).
  // A Proxy is checked by what it wraps (h.target: its innermost target,
  // read in Go, no trap run): the keys come from the target natively, and
  // a Proxy of a String object or of an array with a lying length trap
  // went past the check with all its keys.
  function checkKeys(what, v) {
    const t = proxyTarget(v);
    const n = strLen(t);
    if (n > MAX_KEYS) refuse(what + " of a string", n, MAX_KEYS, "characters");
    if (isArray(t) && lengthOf(t) > MAX_KEYS) refuse(what + " of an array", lengthOf(t), MAX_KEYS, "elements");
    return v;
  }

  // Not offered: binary data (allocated whole in one step, and not needed
  // for JSON tools), BigInt (one operator can allocate without bound),
  // what would make a run depend on the garbage collector, and goja's
  // GoError (not ECMAScript; goja's own references to it remain).
  for (const n of ["ArrayBuffer", "SharedArrayBuffer", "DataView", "Int8Array", "Uint8Array",
    "Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array", "Uint32Array", "Float32Array",
    "Float64Array", "BigInt64Array", "BigUint64Array", "Atomics", "BigInt", "WeakRef",
    "FinalizationRegistry", "GoError"]) {
    delete G[n];
  }

  // No code compiles code: eval and the Function constructors throw.
  function noEval(what) {
    return function () { throw new EvalErrorC(what + " is not available in code mode"); };
  }
  def(G, "eval", noEval("eval"));
  for (const [proto, name] of [
    [getPrototypeOf(function () {}), "Function"],
    [getPrototypeOf(async function () {}), "AsyncFunction"],
    [getPrototypeOf(function* () {}), "GeneratorFunction"]]) {
    const stub = noEval("the " + name + " constructor");
    defineProperty(stub, "name", { value: name, configurable: true });
    defineProperty(stub, "prototype", { value: proto, writable: false, enumerable: false, configurable: false });
    def(proto, "constructor", stub);
    if (name === "Function") def(G, "Function", stub);
  }

  // Built-in iterators step through JavaScript, so a spread or Array.from
  // over a long sequence can be interrupted between elements.
  for (const it of [[][symIterator](), ""[symIterator](), new MapC().entries(), new SetC().values(),
    /x/g[Symbol.matchAll]("")]) {
    replace(getPrototypeOf(it), "next", (orig) => ({ next() { return apply(orig, this, []); } }).next);
  }

  // Array methods: none runs over more than MAX_ELEMS elements.
  const AP = A.prototype;
  function joinGuarded(o, sep, conv) {
    const len = lengthOf(o);
    checkElems("Array.prototype.join", len);
    let total = len > 1 ? (len - 1) * sep.length : 0;
    checkChars("Array.prototype.join", total);
    const parts = [];
    for (let i = 0; i < len; i++) {
      const v = o[i];
      const s = v === undefined || v === null ? "" : conv(v);
      total += s.length;
      if (total > MAX_STR) checkChars("Array.prototype.join", total);
      parts[i] = s;
    }
    return apply(arrayJoin, parts, [sep]);
  }
  def(AP, "join", ({ join(sep) {
    return joinGuarded(this, sep === undefined ? "," : `${sep}`, (v) => `${v}`);
  } }).join);
  def(AP, "toLocaleString", ({ toLocaleString() {
    return joinGuarded(this, ",", (v) => `${v.toLocaleString()}`);
  } }).toLocaleString);
  // flat, flatMap and (unless every part is a plain Array) concat are
  // done here, reading each element once: the built-ins read again what a
  // guard had counted, and an index getter, a Proxy's length trap or an
  // isConcatSpreadable getter could then hand them 4 million elements
  // counted as one (flatMap was guarded by its receiver's length only:
  // new Array(100).fill(0).flatMap(() => big) made 100 copies of big).
  function put(out, v, what) {
    if (out.length >= MAX_ELEMS) checkElems(what, out.length + 1);
    out[out.length] = v;
  }
  function flatInto(out, source, depth, what) {
    const len = lengthOf(source);
    checkElems(what, len);
    for (let i = 0; i < len; i++) {
      if (!(i in source)) continue;
      const v = source[i];
      if (depth > 0 && isArray(v)) flatInto(out, v, depth - 1, what);
      else put(out, v, what);
    }
  }
  // flatCount is how many elements a.flat(depth) has, each shared array
  // counted once per depth, stopping past MAX_ELEMS: a quick refusal of
  // a structure that shares arrays (flatInto would copy them up to the
  // cap first).
  function flatCount(a, depth, memo) {
    const key = apply(mapGet, memo, [a]);
    if (key !== undefined && key[0] === depth) return key[1];
    const len = lengthOf(a);
    checkElems("Array.prototype.flat", len);
    let n = 0;
    for (let i = 0; i < len; i++) {
      if (!(i in a)) continue;
      const v = a[i];
      n += depth > 0 && isArray(v) ? flatCount(v, depth - 1, memo) : 1;
      if (n > MAX_ELEMS) checkElems("Array.prototype.flat", n);
    }
    apply(mapSet, memo, [a, [depth, n]]);
    return n;
  }
  def(AP, "flat", ({ flat(depth) {
    const o = thisObject(this, "Array.prototype.flat");
    let d = depth === undefined ? 1 : +depth;
    if (!(d > 0)) d = 0;
    if (d > MAX_FLAT) d = MAX_FLAT;
    flatCount(o, floor(d), new MapC());
    const out = [];
    flatInto(out, o, floor(d), "Array.prototype.flat");
    return out;
  } }).flat);
  defineProperty(AP.flat, "length", { value: 0, configurable: true });
  def(AP, "flatMap", ({ flatMap(fn, thisArg) {
    const o = thisObject(this, "Array.prototype.flatMap");
    if (typeof fn !== "function") throw new TypeErrorC("Array.prototype.flatMap: the callback is not a function");
    const len = lengthOf(o);
    checkElems("Array.prototype.flatMap", len);
    const out = [];
    for (let i = 0; i < len; i++) {
      if (!(i in o)) continue;
      const v = apply(fn, thisArg, [o[i], i, o]);
      if (isArray(v)) flatInto(out, v, 0, "Array.prototype.flatMap");
      else put(out, v, "Array.prototype.flatMap");
    }
    return out;
  } }).flatMap);
  defineProperty(AP.flatMap, "length", { value: 1, configurable: true });
  const symSpreadable = Symbol.isConcatSpreadable;
  replace(AP, "concat", (orig) => ({ concat(...items) {
    const o = thisObject(this, "Array.prototype.concat");
    const parts = [o];
    for (let i = 0; i < items.length; i++) parts[i + 1] = items[i];
    let plain = true, n = 0;
    for (let i = 0; i < parts.length && plain; i++) {
      const e = parts[i];
      if (e === null || typeof e !== "object" && typeof e !== "function") { n++; continue; }
      if (!plainArray(e) || e[symSpreadable] !== undefined) plain = false;
      else n += lengthOf(e);
    }
    if (plain) {
      checkElems("Array.prototype.concat", n);
      return apply(orig, o, items);
    }
    const out = [];
    let k = 0;
    for (let i = 0; i < parts.length; i++) {
      const e = parts[i];
      let spread = false;
      if (e !== null && (typeof e === "object" || typeof e === "function")) {
        const sp = e[symSpreadable];
        spread = sp !== undefined ? !!sp : isArray(e);
      }
      if (!spread) {
        checkElems("Array.prototype.concat", k + 1);
        out[k++] = e;
        continue;
      }
      const len = lengthOf(e);
      checkElems("Array.prototype.concat", k + len);
      for (let j = 0; j < len; j++, k++) if (j in e) out[k] = e[j];
    }
    out.length = k;
    return out;
  } }).concat);
  for (const key of ownKeys(AP)) {
    if (key === "constructor" || key === "join" || key === "toLocaleString" || key === "flat" || key === "flatMap" || key === "concat") continue;
    const d = getOwnPropertyDescriptor(AP, key);
    if (typeof d.value !== "function") continue;
    const what = "Array.prototype." + (typeof key === "symbol" ? "[" + key.description + "]" : key);
    replace(AP, key, (orig) => ({ m(...args) {
      const n = lengthOf(this);
      checkElems(what, n);
      return apply(orig, pinned(this, n), args);
    } }).m);
  }
  replace(A, "from", (orig) => ({ from(items, mapFn, thisArg) {
    let it = items;
    if (items !== null && items !== undefined && items[symIterator] === undefined) {
      const n = lengthOf(items);
      checkElems("Array.from", n);
      it = pinned(items, n);
    }
    return apply(orig, this, [it, mapFn, thisArg]);
  } }).from);

  // Calls with an argument list: at most MAX_ARGS arguments.
  const FP = getPrototypeOf(function () {});
  replace(FP, "apply", (orig) => ({ apply(thisArg, args) {
    let a = args;
    if (args !== null && args !== undefined) {
      const n = lengthOf(args);
      if (n > MAX_ARGS) refuse("Function.prototype.apply", n, MAX_ARGS, "arguments");
      a = pinned(args, n);
    }
    return apply(orig, this, [thisArg, a]);
  } }).apply);
  // Reflect.apply(target, thisArg, args), Reflect.construct(target, args,
  // newTarget): the guard read thisArg as Reflect.apply's list, so
  // Reflect.apply(Math.max, null, new Array(1e7)) was not bounded.
  for (const [key, at] of [["apply", 2], ["construct", 1]]) {
    replace(Reflect, key, (orig) => ({ m(...all) {
      const args = all[at];
      if (args !== null && args !== undefined) {
        const n = lengthOf(args);
        if (n > MAX_ARGS) refuse("Reflect." + key, n, MAX_ARGS, "arguments");
        all[at] = pinned(args, n);
      }
      return apply(orig, this, all);
    } }).m);
  }

  // Strings: no result over MAX_STR characters.
  const SP = S.prototype;
  function thisString(v, what) {
    if (v === null || v === undefined) throw new TypeErrorC(what + " called on null or undefined");
    return typeof v === "string" ? v : `${v}`;
  }
  replace(SP, "repeat", (orig) => ({ repeat(count) {
    const s = thisString(this, "String.prototype.repeat");
    // The number checked is the number used: a valueOf answering 1 to
    // the guard and 1e9 to the built-in is read once.
    const n = +count;
    if (n > 0 && s.length > 0 && s.length * n > MAX_STR) checkChars("String.prototype.repeat", s.length * n);
    return apply(orig, s, [n]);
  } }).repeat);
  for (const key of ["padStart", "padEnd"]) {
    replace(SP, key, (orig) => ({ m(maxLength, fill) {
      const s = thisString(this, "String.prototype." + key);
      const n = toLength(maxLength);
      if (n > s.length && n > MAX_STR) checkChars("String.prototype." + key, n);
      return apply(orig, s, [n, fill]);
    } }).m);
  }
  // occurrences counts pat in s, stopping past limit.
  function occurrences(s, pat, limit) {
    if (pat.length === 0) return s.length + 1;
    let n = 0;
    for (let i = apply(strIndexOf, s, [pat, 0]); i >= 0; i = apply(strIndexOf, s, [pat, i + pat.length])) {
      if (++n > limit) break;
    }
    return n;
  }
  // perMatch bounds what one replacement of pat in s can insert.
  function perMatch(repl, s, patLen) {
    let n = repl.length;
    for (let i = apply(strIndexOf, repl, ["$", 0]); i >= 0; i = apply(strIndexOf, repl, ["$", i + 1])) {
      const c = repl[i + 1];
      n += c === "`" || c === "'" ? s.length : patLen;
    }
    return n;
  }
  for (const key of ["replace", "replaceAll"]) {
    replace(SP, key, (orig) => ({ m(pattern, replacement) {
      if (pattern !== null && pattern !== undefined && typeof pattern === "object") {
        // As the built-in would, but reading the method once: read
        // again, a getter could hand the built-in an unchecked string.
        const m = pattern[symReplace];
        if (m !== undefined && m !== null) {
          if (key === "replaceAll" && isRegExp(pattern) && !isGlobal(pattern)) throw new TypeErrorC("replaceAll must be called with a global RegExp");
          if (this === null || this === undefined) throw new TypeErrorC("String.prototype." + key + " called on null or undefined");
          return apply(m, pattern, [this, replacement]); // RegExp.prototype[Symbol.replace] below
        }
      }
      const s = thisString(this, "String.prototype." + key);
      const pat = `${pattern}`;
      const all = key === "replaceAll";
      if (typeof replacement === "function") {
        if (all && s.length > MAX_ELEMS && occurrences(s, pat, MAX_ELEMS) > MAX_ELEMS) {
          refuse("String.prototype.replaceAll", "more than " + MAX_ELEMS, MAX_ELEMS, "matches");
        }
        return apply(orig, s, [pat, replacement]);
      }
      const repl = `${replacement}`;
      const per = perMatch(repl, s, pat.length);
      if (s.length + (s.length + 1) * per > MAX_STR) {
        const n = all ? occurrences(s, pat, MAX_STR) : 1;
        checkChars("String.prototype." + key, s.length + n * per);
      }
      return apply(orig, s, [pat, repl]);
    } }).m);
  }
  replace(SP, "split", (orig) => ({ split(separator, limit) {
    if (separator !== null && separator !== undefined && typeof separator === "object") {
      const m = separator[symSplit]; // read once, as for replace
      if (m !== undefined && m !== null) {
        if (this === null || this === undefined) throw new TypeErrorC("String.prototype.split called on null or undefined");
        return apply(m, separator, [this, limit]);
      }
    }
    const s = thisString(this, "String.prototype.split");
    const lim = limit === undefined ? 4294967295 : limit >>> 0;
    // The separator and limit checked are the ones used (converted once).
    const sep = separator === undefined ? undefined : `${separator}`;
    if (sep !== undefined && s.length + 1 > MAX_ELEMS && lim > MAX_ELEMS) {
      const n = sep.length === 0 ? s.length : occurrences(s, sep, MAX_ELEMS) + 1;
      checkElems("String.prototype.split", n);
    }
    return apply(orig, s, [sep, lim]);
  } }).split);
  replace(SP, "concat", (orig) => ({ concat(...args) {
    const s = thisString(this, "String.prototype.concat");
    const strs = [];
    let n = s.length;
    for (let i = 0; i < args.length; i++) {
      const a = `${args[i]}`;
      n += a.length;
      apply(arrayPush, strs, [a]);
    }
    checkChars("String.prototype.concat", n);
    return apply(orig, s, strs);
  } }).concat);
  // normalize can make a string up to 18 times longer (NFKD of U+FDFA)
  // in one step; a string of ASCII only stays as it is.
  replace(SP, "normalize", (orig) => ({ normalize(form) {
    const s = thisString(this, "String.prototype.normalize");
    const f = form === undefined ? "NFC" : `${form}`;
    const grow = f === "NFKC" || f === "NFKD" ? 18 : 4;
    if (s.length * grow > MAX_STR && scan(s, false)) {
      refuse("String.prototype.normalize (" + f + " can make a string " + grow + " times longer)", s.length, floor(MAX_STR / grow), "characters");
    }
    return apply(orig, s, [f]);
  } }).normalize);
  // encodeURI, encodeURIComponent and escape make up to 9 (6) characters
  // of each: a long string is encoded piece by piece (never splitting a
  // surrogate pair), so the result is bounded and the work interruptible.
  const PIECE = 1 << 16;
  for (const [key, grow] of [["encodeURIComponent", 9], ["encodeURI", 9], ["escape", 6]]) {
    replace(G, key, (orig) => ({ m(v) {
      const s = `${v}`;
      if (s.length * grow <= MAX_STR) return apply(orig, undefined, [s]);
      const parts = [];
      let total = 0;
      for (let i = 0; i < s.length;) {
        let j = i + PIECE;
        if (j < s.length) {
          const c = apply(strCharCodeAt, s, [j - 1]);
          if (c >= 0xd800 && c <= 0xdbff) j++;
        }
        const p = apply(orig, undefined, [apply(strSlice, s, [i, j])]);
        total += p.length;
        if (total > MAX_STR) refuse(key + ": the result", "more than " + MAX_STR, MAX_STR, "characters");
        apply(arrayPush, parts, [p]);
        i = j;
      }
      return apply(arrayJoin, parts, [""]);
    } }).m);
  }
  replace(S, "raw", (orig) => ({ raw(template, ...subs) {
    let t = template;
    if (template !== null && template !== undefined) {
      const raw = template.raw; // read once: the built-in gets what was checked
      if (raw !== null && raw !== undefined) {
        const n = lengthOf(raw);
        checkElems("String.raw", n);
        t = { raw: pinned(raw, n) };
      }
    }
    const all = [t];
    for (let i = 0; i < subs.length; i++) all[i + 1] = subs[i];
    return apply(orig, this, all);
  } }).raw);

  // Regular expressions: global match, split and replace collect every
  // match at once, so they refuse strings over MAX_ELEMS characters; a
  // replacement string with $ patterns that could grow past MAX_STR is
  // applied match by match from JavaScript.
  const RP = RegExp.prototype;
  function isGlobal(re) { return !!re.global; }
  // A RegExp's flags are read by the guard and again by the built-in: an
  // own global or flags getter, another prototype, or RegExp.prototype's
  // accessors replaced could answer "not global" to the guard and
  // "global" to the built-in. Such a RegExp is guarded as a global one.
  const rpGlobal = getOwnPropertyDescriptor(RP, "global").get, rpFlags = getOwnPropertyDescriptor(RP, "flags").get;
  function surelyGlobal(re) {
    if (typeof re !== "object" || re === null) return true;
    try {
      if (getPrototypeOf(re) !== RP || getOwnPropertyDescriptor(re, "global") !== undefined || getOwnPropertyDescriptor(re, "flags") !== undefined) return true;
      const g = getOwnPropertyDescriptor(RP, "global"), f = getOwnPropertyDescriptor(RP, "flags");
      if (g === undefined || g.get !== rpGlobal || f === undefined || f.get !== rpFlags) return true;
    } catch (e) { return true; }
    return isGlobal(re);
  }
  function isRegExp(v) {
    const m = v[symMatch];
    return m !== undefined ? !!m : v instanceof RegExpC;
  }
  // Compiling a pattern costs about 200 bytes of Go per character, in
  // one native step: new RegExp("a".repeat(1e8)) was gigabytes. Every
  // route from a string to a RegExp is guarded: the constructor (with or
  // without new, subclasses through super), String.prototype.match,
  // matchAll and search of a string; compile, which recompiles in place,
  // is gone.
  const MAX_PATTERN = floor(MAX_KEYS / 4);
  function checkPattern(src) {
    if (src.length > MAX_PATTERN) refuse("RegExp: the pattern", src.length, MAX_PATTERN, "characters");
    return src;
  }
  const reflectConstruct = Reflect.construct;
  const RegExpW = function RegExp(pattern, flags) {
    const re = typeof pattern === "object" && pattern !== null && isRegExp(pattern);
    if (new.target === undefined && flags === undefined && re && pattern.constructor === RegExpW) {
      return pattern; // RegExp(re) is re itself
    }
    // The pattern and flags are read once and checked; the built-in gets
    // those strings.
    let src = pattern, fl = flags;
    if (re) {
      src = pattern.source;
      if (fl === undefined) fl = pattern.flags;
    }
    src = checkPattern(src === undefined ? "" : `${src}`);
    const args = fl === undefined ? [src] : [src, `${fl}`];
    return apply(reflectConstruct, undefined, [RegExpC, args, new.target === undefined ? RegExpW : new.target]);
  };
  defineProperty(RegExpW, "length", { value: 2, configurable: true });
  defineProperty(RegExpW, "prototype", { value: RP, writable: false, enumerable: false, configurable: false });
  for (const k of ownKeys(RegExpC)) {
    if (k !== "prototype" && k !== "length" && k !== "name") defineProperty(RegExpW, k, getOwnPropertyDescriptor(RegExpC, k));
  }
  def(RP, "constructor", RegExpW);
  def(G, "RegExp", RegExpW);
  delete RP.compile;
  const symMatchAll = Symbol.matchAll, symSearch = Symbol.search;
  for (const [key, sym] of [["match", symMatch], ["search", symSearch], ["matchAll", symMatchAll]]) {
    replace(SP, key, (orig) => ({ m(regexp) {
      if (this === undefined || this === null) throw new TypeErrorC("String.prototype." + key + " called on null or undefined");
      if (regexp !== undefined && regexp !== null && (typeof regexp === "object" || typeof regexp === "function")) {
        if (key === "matchAll" && isRegExp(regexp) && apply(strIndexOf, `${regexp.flags}`, ["g"]) < 0) {
          throw new TypeErrorC("String.prototype.matchAll called with a non-global RegExp argument");
        }
        // The method is read once and called as the built-in would.
        const m = regexp[sym];
        if (m !== undefined && m !== null) return apply(m, regexp, [this]);
      }
      // A RegExp is made of the argument's string.
      return apply(orig, this, [regexp === undefined ? undefined : checkPattern(`${regexp}`)]);
    } }).m);
  }
  replace(RP, symMatch, (orig) => ({ m(str) {
    const s = `${str}`;
    if (s.length > MAX_ELEMS && surelyGlobal(this)) refuse("global RegExp match on a string", s.length, MAX_ELEMS, "characters");
    return apply(orig, this, [s]);
  } }).m);
  replace(RP, symSplit, (orig) => ({ m(str, limit) {
    const s = `${str}`;
    const lim = limit === undefined ? 4294967295 : limit >>> 0;
    if (s.length > MAX_ELEMS && lim > MAX_ELEMS) refuse("RegExp split of a string", s.length, MAX_ELEMS, "characters");
    return apply(orig, this, [s, limit === undefined ? undefined : lim]);
  } }).m);
  function substitution(tpl) {
    return function (matched, ...rest) {
      let groups = rest[rest.length - 1];
      let str, pos, caps;
      if (typeof groups === "object" && groups !== null) {
        str = rest[rest.length - 2]; pos = rest[rest.length - 3]; caps = apply(arraySlice, rest, [0, rest.length - 3]);
      } else {
        groups = undefined; str = rest[rest.length - 1]; pos = rest[rest.length - 2]; caps = apply(arraySlice, rest, [0, rest.length - 2]);
      }
      const m = caps.length;
      let out = "";
      for (let i = 0; i < tpl.length;) {
        const c = tpl[i];
        if (c !== "$" || i + 1 >= tpl.length) { out += c; i++; continue; }
        const d = tpl[i + 1];
        if (d === "$") { out += "$"; i += 2; }
        else if (d === "&") { out += matched; i += 2; }
        else if (d === "`") { out += apply(strSlice, str, [0, pos]); i += 2; }
        else if (d === "'") { out += apply(strSlice, str, [pos + matched.length]); i += 2; }
        else if (d >= "0" && d <= "9") {
          const e = tpl[i + 2];
          const two = e !== undefined && e >= "0" && e <= "9" ? +(d + e) : 0;
          if (two >= 1 && two <= m) { const v = caps[two - 1]; out += v === undefined ? "" : v; i += 3; }
          else if (+d >= 1 && +d <= m) { const v = caps[+d - 1]; out += v === undefined ? "" : v; i += 2; }
          else { out += "$"; i++; }
        } else if (d === "<" && groups !== undefined) {
          const end = apply(strIndexOf, tpl, [">", i]);
          if (end < 0) { out += "$<"; i += 2; continue; }
          const v = groups[apply(strSlice, tpl, [i + 2, end])];
          if (v !== undefined) out += `${v}`;
          i = end + 1;
        } else { out += "$"; i++; }
      }
      return out;
    };
  }
  replace(RP, symReplace, (orig) => ({ m(str, replaceValue) {
    const s = `${str}`;
    const global = surelyGlobal(this);
    if (global && s.length > MAX_ELEMS) refuse("global RegExp replace on a string", s.length, MAX_ELEMS, "characters");
    let r = replaceValue;
    if (typeof r !== "function") {
      r = `${r}`;
      const per = perMatch(r, s, s.length);
      if (s.length + (global ? s.length + 1 : 1) * per > MAX_STR) r = substitution(r);
    }
    return apply(orig, this, [s, r]);
  } }).m);

  // Object keys from a string: one property per character, so strings
  // over MAX_KEYS characters are refused (also in object spread and
  // for-in, through the guard the code is rewritten to call).
  // getOwnPropertySymbols lists every own key natively before it keeps
  // the symbols.
  for (const key of ["keys", "values", "entries", "getOwnPropertyNames", "getOwnPropertyDescriptors", "getOwnPropertySymbols"]) {
    replace(O, key, (orig) => ({ m(o) { checkKeys("Object." + key, o); return apply(orig, this, [o]); } }).m);
  }
  // So do freeze, seal, isFrozen and isSealed of an object
  // (Object.freeze(new String(s)) made one key per character); a
  // primitive is returned as it is.
  for (const key of ["freeze", "seal", "isFrozen", "isSealed"]) {
    replace(O, key, (orig) => ({ m(o) {
      if (typeof o === "object" && o !== null) checkKeys("Object." + key, o);
      return apply(orig, this, [o]);
    } }).m);
  }
  replace(O, "assign", (orig) => ({ assign(target, ...sources) {
    for (let i = 0; i < sources.length; i++) checkKeys("Object.assign", sources[i]);
    return apply(orig, this, [target, ...sources]);
  } }).assign);
  replace(O, "defineProperties", (orig) => ({ defineProperties(o, props) {
    checkKeys("Object.defineProperties", props);
    return apply(orig, this, [o, props]);
  } }).defineProperties);
  replace(Reflect, "ownKeys", (orig) => ({ ownKeys(o) { checkKeys("Reflect.ownKeys", o); return apply(orig, this, [o]); } }).ownKeys);
  defineProperty(G, h.guardName, {
    value: ({ guard(v) { return checkKeys("spreading or enumerating the keys", v); } }).guard,
    writable: false, enumerable: false, configurable: false,
  });

  // JSON: nesting up to MAX_DEPTH levels, and stringify goes through a
  // replacer so a large or shared structure can be interrupted.
  // A string is written with each control character, quote, backslash
  // or lone surrogate as up to 6 characters, in one native step: a long
  // string with any of them is refused.
  const MAX_ESC = floor(MAX_STR / 6);
  function checkEscapes(v) {
    if (v.length > MAX_ESC && scan(v, true)) {
      refuse("JSON.stringify: a string with characters to escape (control characters, quotes, backslashes, surrogates)", v.length, MAX_ESC, "characters");
    }
  }
  function stringify(value, replacer, space) {
    const depth = new WeakMapC();
    const userFn = typeof replacer === "function" ? replacer : undefined;
    let allow;
    if (isArray(replacer)) {
      allow = [];
      const seen = new SetC();
      for (let i = 0; i < replacer.length; i++) {
        const v = replacer[i];
        let k;
        if (typeof v === "string") k = v;
        else if (typeof v === "number") k = `${v}`;
        else if (typeof v === "object" && v !== null && (v instanceof S || v instanceof Number)) k = `${v}`;
        if (k !== undefined && !seen.has(k)) { seen.add(k); apply(arrayPush, allow, [k]); }
      }
    }
    function replacerFn(key, v) {
      if (userFn !== undefined) v = apply(userFn, this, [key, v]);
      // A Proxy (of a String object: no [[StringData]]) is written as an
      // object, its keys listed natively from the target first.
      if (typeof v === "object" && v !== null && proxyTarget(v) !== v) checkKeys("JSON.stringify", v);
      if (typeof v === "string") checkEscapes(v);
      if (key.length > MAX_ESC) checkEscapes(key);
      if (typeof v === "object" && v !== null) {
        let d = 1;
        if (typeof this === "object" && this !== null) {
          const hd = apply(wmGet, depth, [this]);
          if (hd !== undefined) d = hd + 1;
        }
        if (d > MAX_DEPTH) throw new RangeErrorC("JSON.stringify: value nested deeper than " + MAX_DEPTH + " levels");
        if (allow !== undefined && !isArray(v)) {
          const o = {};
          for (let i = 0; i < allow.length; i++) {
            const x = v[allow[i]];
            if (x !== undefined) o[allow[i]] = x;
          }
          v = o;
        }
        apply(wmSet, depth, [v, d]);
      }
      return v;
    }
    return apply(jsonStringify, undefined, [value, replacerFn, space]);
  }
  function parse(text, reviver) {
    const t = `${text}`;
    if (jsonDepth(t) > MAX_DEPTH) throw new RangeErrorC("JSON.parse: text nested deeper than " + MAX_DEPTH + " levels");
    // Parsed in one native step: a number costs about 200 bytes, an array
    // or object 600 (a text of 128 million characters was gigabytes).
    if (t.length > MAX_KEYS) {
      const n = jsonSize(t);
      if (n[0] > MAX_KEYS) refuse("JSON.parse: the text", n[0], MAX_KEYS, "arrays and objects");
      if (n[1] > MAX_ELEMS) refuse("JSON.parse: the text", n[1], MAX_ELEMS, "values");
    }
    // goja parses numbers with Go's encoding/json, which refuses one
    // beyond a float64's range (1e400) where JavaScript gives Infinity:
    // such numbers come as marked strings, revived as ±Infinity.
    const o = overflow(t);
    if (o !== null) {
      const plus = o[1] + "+", minus = o[1] + "-";
      const user = typeof reviver === "function" ? reviver : undefined;
      return apply(jsonParse, undefined, [o[0], function (k, v) {
        if (v === plus || v === minus) {
          v = v === plus ? Infinity : -Infinity;
          defineProperty(this, k, { value: v, writable: true, enumerable: true, configurable: true });
        }
        return user === undefined ? v : apply(user, this, [k, v]);
      }]);
    }
    return reviver === undefined ? apply(jsonParse, undefined, [t]) : apply(jsonParse, undefined, [t, reviver]);
  }
  def(JSON, "stringify", ({ stringify(value, replacer, space) { return stringify(value, replacer, space); } }).stringify);
  def(JSON, "parse", ({ parse(text, reviver) { return parse(text, reviver); } }).parse);

  // text is v as a string, or dflt when it is undefined or its
  // conversion throws (a symbol, a toString that throws).
  function text(v, dflt) {
    if (v === undefined) return dflt;
    try { return `${v}`; } catch (x) { return dflt; }
  }
  // console: everything goes to the one output, warn and error prefixed.
  function errorText(e) {
    let name, message;
    try { name = e.name; message = e.message; } catch (x) { /* a throwing getter */ }
    name = text(name, "Error");
    message = text(message, "");
    // goja's TypeError for an object that has no toString or valueOf (a
    // null prototype) prints the Go struct behind it: addresses and the
    // object's own strings. The model gets JavaScript's wording.
    if (apply(strIndexOf, message, ["Could not convert &{", 0]) === 0 && apply(strSlice, message, [-13]) === " to primitive") {
      message = "Cannot convert object to primitive value";
    }
    return message === "" ? name : name + ": " + message;
  }
  function fmt(v, top) {
    switch (typeof v) {
      case "string": return top ? v : jsonStringify(v);
      case "undefined": return "undefined";
      case "function": {
        let name;
        try { name = v.name; } catch (e) { /* a throwing getter */ }
        return "[Function" + (typeof name === "string" && name !== "" ? ": " + name : " (anonymous)") + "]";
      }
      case "symbol": return S(v);
      case "object": {
        if (v === null) return "null";
        try {
          if (v instanceof ErrorC) return errorText(v);
          if (v instanceof MapC) return "Map(" + v.size + ") " + stringify(apply(arrayFrom, A, [apply(mapEntries, v, [])]));
          if (v instanceof SetC) return "Set(" + v.size + ") " + stringify(apply(arrayFrom, A, [apply(setValues, v, [])]));
          const s = stringify(v);
          return s === undefined ? S(v) : s;
        } catch (e) {
          return "[unprintable " + (isArray(v) ? "array" : "object") + ": " + errorText(e) + "]";
        }
      }
      default: return S(v);
    }
  }
  function line(args) {
    let s = "";
    // Past MAX_OUT characters nothing more can be kept, so the rest is
    // not formatted (appending 100,000 long arguments one by one is
    // quadratic).
    for (let i = 0; i < args.length && s.length <= MAX_OUT; i++) {
      if (i > 0) s += " ";
      s += fmt(args[i], true);
    }
    return s;
  }
  const console = {};
  for (const [key, level] of [["log", 0], ["info", 0], ["debug", 0], ["warn", 1], ["error", 2]]) {
    def(console, key, ({ m(...args) { if (h.full()) { emit(level, ""); return; } emit(level, line(args)); } }).m);
    defineProperty(console[key], "name", { value: key, configurable: true });
  }
  def(G, "console", console);

  // tools: one async function per tool. The call itself is synchronous
  // (Go runs it before the function returns its promise), so the calls run
  // one at a time, in the order the code makes them.
  function describe(v) {
    return v === null ? "null" : isArray(v) ? "an array" : typeof v;
  }
  function toolError(name, message, errName) {
    const e = new ErrorC(message);
    if (errName !== undefined) defineProperty(e, "name", { value: errName, writable: true, configurable: true });
    defineProperty(e, "tool", { value: name, writable: true, configurable: true });
    return e;
  }
  // What JSON cannot carry is refused rather than sent changed: NaN and
  // ±Infinity became null, a Map or Set {}, and a function or symbol was
  // left out. (undefined is left out: an optional parameter not given.)
  function cannotCarry(v) {
    switch (typeof v) {
      case "number":
        return v !== v || v === Infinity || v === -Infinity ? [S(v), "sent as null", "a finite number, or null"] : undefined;
      case "function": return ["a function", "left out", "a value"];
      case "symbol": return ["a symbol", "left out", "a string"];
      case "object":
        if (v instanceof MapC) return ["a Map", "sent as {}", "an object (Object.fromEntries(map)) or an array ([...map])"];
        if (v instanceof SetC) return ["a Set", "sent as {}", "an array ([...set])"];
    }
    return undefined;
  }
  function argCheck(id) {
    return function (key, v) {
      const bad = cannotCarry(v);
      if (bad !== undefined) {
        const what = isArray(this) ? "element " + key : "field " + jsonStringify(`${key}`);
        throw new TypeErrorC("tools." + id + ": the argument's " + what + " is " + bad[0] + ", which JSON cannot carry (it would be " +
          bad[1] + "): pass " + bad[2]);
      }
      return v;
    };
  }
  function invoke(name, id, args) {
    if (args === undefined) args = {};
    else if (typeof args !== "object" || args === null || isArray(args)) {
      throw new TypeErrorC("tools." + id + " takes one argument, an object of named parameters, not " + describe(args));
    }
    if (args instanceof MapC || args instanceof SetC) {
      throw new TypeErrorC("tools." + id + " takes an object of named parameters, not a " + (args instanceof MapC ? "Map: pass Object.fromEntries(map)" : "Set"));
    }
    const json = stringify(args, argCheck(id));
    // A toJSON method (the code's, one on Object.prototype, Date's) can
    // turn the object into a string, number or array; the Host is
    // promised a JSON object.
    if (json !== undefined && json[0] !== "{") {
      const what = json[0] === "[" ? "an array" : json[0] === '"' ? "a string" : json;
      throw new TypeErrorC("tools." + id + " takes an object of named parameters; its argument serialised to " + what + " (a toJSON method?)");
    }
    const r = hostCall(name, json === undefined ? "{}" : json);
    switch (r[0]) {
      case 0: {
        // The result is parsed as the code's JSON.parse is, within its
        // limits: a result over them says which tool and what to do,
        // not JSON.parse, which the code did not call.
        let v;
        try { v = parse(r[1]); } catch (e) {
          throw toolError(name, "the result of tools." + id + " is too large for code mode (" + errorText(e) +
            "): ask the tool for less, with a filter or a page if it has them", e instanceof RangeErrorC ? "RangeError" : undefined);
        }
        return v;
      }
      case 1: return r[1];
      case 2: throw toolError(name, r[1], "ToolError");
      default: throw toolError(name, r[1]);
    }
  }
  const tools = create(null);
  // A tool's name that is not its identifier ("get-sum"), as search_tools
  // and get_tool_details give it, reaches the tool too (tools["get-sum"]).
  const byName = create(null);
  const names = h.names, idents = h.idents;
  for (let i = 0; i < names.length; i++) {
    const name = names[i], id = idents[i];
    const f = ({ async [id](args) { return invoke(name, id, args); } })[id];
    defineProperty(tools, id, { value: f, writable: false, enumerable: true, configurable: false });
    if (name !== id) defineProperty(byName, name, { value: f, writable: false, enumerable: false, configurable: false });
  }
  // String(tools), `${tools}`: a null-prototype object has no toString.
  defineProperty(tools, Symbol.toPrimitive, { value: ({ [Symbol.toPrimitive]() { return "[object tools]"; } })[Symbol.toPrimitive], writable: false, enumerable: false, configurable: false });
  freeze(tools);
  // A name the job does not have says so, rather than goja's "Object has
  // no member". Keys a runtime or JSON probes (then, toJSON, ...; a tool
  // of such a name is tools.NAME_, see implicit in catalog.go) and
  // symbols stay undefined.
  const probes = { then: 1, toJSON: 1, constructor: 1, valueOf: 1, toString: 1, toLocaleString: 1, inspect: 1 };
  const toolsView = new Proxy(tools, {
    // goja's own error for a frozen target prints the Go object.
    setPrototypeOf(t, p) {
      if (p === null) return true;
      throw new TypeErrorC("tools cannot be changed");
    },
    get(t, k) {
      if (typeof k !== "string" || k in t || k in probes) return t[k];
      if (k in byName) return byName[k];
      // A name of megabytes is quoted by its start: the message would
      // be cut before saying what is wrong.
      const shown = k.length > 128 ? apply(strSlice, k, [0, 128]) + "... (" + k.length + " characters)" : k;
      // The Host may know why (its server is down): say that instead.
      const why = explain(k);
      if (why !== "") throw new TypeErrorC("tools." + shown + " is not a tool of this job: " + why);
      throw new TypeErrorC("tools." + shown + " is not a tool of this job (its tools are listed in execute_code's description; search_tools finds them by what they do)");
    },
  });
  defineProperty(G, "tools", { value: toolsView, writable: false, enumerable: false, configurable: false });

  function thrown(v) {
    let isError = false;
    try { isError = typeof v === "object" && v !== null && v instanceof ErrorC; } catch (e) { /* a Proxy's trap threw */ }
    if (isError) {
      let stack = "";
      try { stack = `${v.stack}`; } catch (e) { /* a throwing getter */ }
      return [errorText(v), stack];
    }
    return [fmt(v, false), ""];
  }
  return { fmt: (v) => fmt(v, true), thrown: thrown };
})
