// The engine's side of the JSONata embedding (src/transform/jsonata_engine.cc).
//
// The engine evaluates, in the bare SpiderMonkey global, one script:
//   (function () { <this file> <the synchronous jsonata bundle> return __qbMakeDriver(__qbJsonata); })()
// so none of these names becomes a global. The bundle reads __qbGlobalShim as its `global`. C++
// keeps the returned object and calls only its compile/evaluate/release functions.
//
// Protocol (strings, so C++ reads one value per call):
//   compile(text, maxDepth)          -> slot number, or 'E' + error JSON
//   evaluate(slot, input, bindings, maxChars)
//                                    -> 'R' + result JSON | 'U' (no value: undefined, a function)
//                                       | 'E' + error JSON
//                                       | 'L' + length (result over maxChars characters)
//                                       | 'S' + message (the engine's stack ran out)
//                                       | 'X' + message (any other engine error)
//   release(slot)                    -> undefined; the slot is reused by a later compile
// Error JSON: {"code": "T2001", "position": 3, "token": "-", "message": "..."}.

// What the bundle needs from Node: `new global.Buffer.from(text, 'binary'|'base64')` with
// `.toString('base64'|'binary')` for $base64encode/$base64decode, with Node's exact behaviour
// (binary = the low byte of each UTF-16 unit; base64 decoding skips characters outside the
// alphabet, accepts the URL-safe one, and stops at the first '=').
var __qbGlobalShim = (function () {
  'use strict';
  var alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  var sextets = {};
  for (var i = 0; i < 64; i++) sextets[alphabet.charAt(i)] = i;
  sextets['-'] = 62;
  sextets['_'] = 63;

  function encode(binary) {
    var out = '';
    for (var at = 0; at < binary.length; at += 3) {
      var a = binary.charCodeAt(at) & 0xff;
      var b = at + 1 < binary.length ? binary.charCodeAt(at + 1) & 0xff : 0;
      var c = at + 2 < binary.length ? binary.charCodeAt(at + 2) & 0xff : 0;
      var n = (a << 16) | (b << 8) | c;
      out += alphabet.charAt((n >> 18) & 63) + alphabet.charAt((n >> 12) & 63);
      out += at + 1 < binary.length ? alphabet.charAt((n >> 6) & 63) : '=';
      out += at + 2 < binary.length ? alphabet.charAt(n & 63) : '=';
    }
    return out;
  }

  function decode(text) {
    var values = [];
    for (var at = 0; at < text.length; at++) {
      var ch = text.charAt(at);
      if (ch === '=') break;
      if (Object.prototype.hasOwnProperty.call(sextets, ch)) values.push(sextets[ch]);
    }
    var out = '';
    for (var k = 0; k + 1 < values.length; k += 4) {
      var n = (values[k] << 18) | (values[k + 1] << 12) |
          ((k + 2 < values.length ? values[k + 2] : 0) << 6) |
          (k + 3 < values.length ? values[k + 3] : 0);
      out += String.fromCharCode((n >> 16) & 0xff);
      if (k + 2 < values.length) out += String.fromCharCode((n >> 8) & 0xff);
      if (k + 3 < values.length) out += String.fromCharCode(n & 0xff);
    }
    return out;
  }

  // Called with `new`: a constructor that returns an object gives that object.
  function from(text, encoding) {
    var binary = encoding === 'base64' ? decode(String(text)) : String(text);
    return {
      toString: function (to) {
        if (to === 'base64') return encode(binary);
        var out = '';
        for (var at = 0; at < binary.length; at++) {
          out += String.fromCharCode(binary.charCodeAt(at) & 0xff);
        }
        return out;
      }
    };
  }
  return {Buffer: {from: from}};
})();

function __qbMakeDriver(jsonata) {
  'use strict';
  var slots = [];
  var free = [];

  // Functions (JSONata lambdas, built-ins) are not JSON: left out of objects, null in arrays, no
  // value at the top, as JSON.stringify does with JavaScript functions.
  function withoutFunctions(key, value) {
    if (typeof value === 'function') return undefined;
    if (value !== null && typeof value === 'object' &&
        (value._jsonata_lambda === true || value._jsonata_function === true)) {
      return undefined;
    }
    return value;
  }

  // Half of a UTF-16 surrogate pair (a string cut inside one: $split(s, ""), $match(s, /./),
  // $substringBefore) is written by JSON.stringify as an escape such as \ud83d, which JSON
  // readers refuse (nlohmann and simdjson, so the destinations' checks and the admin route's
  // callers; PostgreSQL's jsonb): a delivery would fail as not JSON. It becomes U+FFFD, as the
  // UTF-8 encoder writes such a character anywhere else. An escape is a run of backslashes of
  // odd length before the `u` (an even run is backslashes of the text); JSON.stringify writes
  // its hex digits in lower case and never escapes a whole pair.
  var halfPair = /(\\+)u(d[89a-f][0-9a-f]{2})/g;
  function wellFormed(text) {
    if (text.indexOf('\\ud') < 0) return text;
    return text.replace(halfPair, function (escape, backslashes) {
      return backslashes.length % 2 === 1 ? backslashes + 'ufffd' : escape;
    });
  }

  function describe(err) {
    if (err !== null && typeof err === 'object' && typeof err.code === 'string') {
      return 'E' + JSON.stringify({
        code: err.code,
        position: typeof err.position === 'number' ? err.position : -1,
        token: err.token === undefined ? null : String(err.token),
        message: String(err.message)
      });
    }
    if (typeof InternalError !== 'undefined' && err instanceof InternalError &&
        /recursion/.test(String(err.message))) {
      return 'S' + String(err.message);
    }
    return 'X' + String(err);
  }

  return {
    compile: function (text, maxDepth) {
      var compiled;
      try {
        compiled = jsonata(text, {stack: maxDepth});
      } catch (err) {
        return describe(err);
      }
      var slot = free.length > 0 ? free.pop() : slots.length;
      slots[slot] = compiled;
      return slot;
    },
    evaluate: function (slot, inputText, bindingsText, maxChars) {
      try {
        var input = inputText === undefined ? undefined : JSON.parse(inputText);
        var bindings = bindingsText === undefined ? undefined : JSON.parse(bindingsText);
        var result = slots[slot].evaluate(input, bindings);
        if (result === undefined) return 'U';
        var text = JSON.stringify(result, withoutFunctions);
        if (text === undefined) return 'U';
        if (text.length > maxChars) return 'L' + text.length;
        return 'R' + wellFormed(text);
      } catch (err) {
        return describe(err);
      }
    },
    release: function (slot) {
      slots[slot] = undefined;
      free.push(slot);
    }
  };
}
