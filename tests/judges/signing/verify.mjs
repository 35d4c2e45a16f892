// verify.mjs <cases.json>: the providers' own verifiers judge QueueBox's signed deliveries.
// A case {secret, body, headers} is checked by npm standardwebhooks and svix (Webhook.verify);
// a case {hmac, encoding, secret, text, prefix, expected} by node's crypto. One JSON line per
// case: {"standardwebhooks": "ok" | <error>, "svix": ...} or {"crypto": "ok" | <error>}.
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { Webhook as SvixWebhook } from "svix";

const judge = (verify) => {
  try {
    verify();
    return "ok";
  } catch (e) {
    return String(e && e.message ? e.message : e);
  }
};

const hmac = (c) => {
  const sig = createHmac(c.hmac, c.secret).update(c.text, "utf8").digest(c.encoding);
  if (c.expected !== c.prefix + sig) throw new Error("signature differs");
};

const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
for (const c of cases) {
  const out = c.hmac
    ? { crypto: judge(() => hmac(c)) }
    : {
        standardwebhooks: judge(() => new StandardWebhook(c.secret).verify(c.body, c.headers)),
        svix: judge(() => new SvixWebhook(c.secret).verify(c.body, c.headers)),
      };
  console.log(JSON.stringify(out));
}
