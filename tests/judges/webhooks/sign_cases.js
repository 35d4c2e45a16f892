// sign_cases.js: webhook requests signed by the providers' own libraries (standardwebhooks,
// stripe), with the answer QueueBox must give each. Written as JSON to argv[2]; the requests are
// made at argv[3] (Unix seconds), the clock the test gives the sources.
//
// Usage: node sign_cases.js <out.json> <now_s>
"use strict";

const fs = require("fs");
const path = require("path");
const modules = path.join(process.cwd(), "node_modules");
const { Webhook } = require(path.join(modules, "standardwebhooks"));
const Stripe = require(path.join(modules, "stripe"));

const [out, nowText] = process.argv.slice(2);
const now = Number(nowText);
const at = (s) => new Date(s * 1000);

// The secrets of the test's sources (webhook_judges_test.cc): the active one, the previous one
// (still accepted during the rotation), a retired one and one never configured.
const SW = {
  active: "whsec_" + Buffer.from("standard webhooks active key 0001").toString("base64"),
  previous: "whsec_" + Buffer.from("standard webhooks previous key 02").toString("base64"),
  retired: "whsec_" + Buffer.from("standard webhooks retired key 003").toString("base64"),
  wrong: "whsec_" + Buffer.from("never configured anywhere key 004").toString("base64"),
};
const ST = {
  active: "whsec_stripeActive0001",
  previous: "whsec_stripePrevious002",
  retired: "whsec_stripeRetired003",
  wrong: "whsec_stripeWrong004",
};

const cases = [];
const accepted = (name, source, headers, body, key) =>
  cases.push({ name, source, headers, body, status: 202, key });
const refused = (name, source, headers, body, error) =>
  cases.push({ name, source, headers, body, status: 401, error });

// Standard Webhooks: Webhook.sign(id, timestamp, payload) -> "v1,<base64>".
function swHeaders(secret, id, ts, body, prefix = "webhook-") {
  return {
    [prefix + "id"]: id,
    [prefix + "timestamp"]: String(ts),
    [prefix + "signature"]: new Webhook(secret).sign(id, at(ts), body),
  };
}
const swBody = (n) => JSON.stringify({ type: "user.created", data: { n, name: "Zoë" } });

accepted("sw: signed with the active secret", "sw", swHeaders(SW.active, "msg_1", now, swBody(1)),
         swBody(1), "msg_1");
accepted("sw: signed with the previous secret", "sw",
         swHeaders(SW.previous, "msg_2", now, swBody(2)), swBody(2), "msg_2");
accepted("sw: svix-* header names", "sw", swHeaders(SW.active, "msg_3", now, swBody(3), "svix-"),
         swBody(3), "msg_3");
accepted("sw: four minutes old", "sw", swHeaders(SW.active, "msg_4", now - 240, swBody(4)),
         swBody(4), "msg_4");
accepted("sw: four minutes ahead", "sw", swHeaders(SW.active, "msg_5", now + 240, swBody(5)),
         swBody(5), "msg_5");
{
  const h = swHeaders(SW.active, "msg_6", now, swBody(6));
  const bad = new Webhook(SW.wrong).sign("msg_6", at(now), swBody(6));
  h["webhook-signature"] = bad + " " + h["webhook-signature"];
  accepted("sw: one bad and one good signature", "sw", h, swBody(6), "msg_6");
}
{
  const h = swHeaders(SW.active, "msg_7", now, swBody(7));
  h["webhook-signature"] = "v1a,c2lnbmVkIGVsc2V3aGVyZQ== " + h["webhook-signature"];
  accepted("sw: an asymmetric entry beside the v1 one", "sw", h, swBody(7), "msg_7");
}
cases.push({ name: "sw: the same message again", source: "sw",
             headers: swHeaders(SW.active, "msg_1", now, swBody(1)), body: swBody(1),
             status: 200, duplicate: true });
refused("sw: wrong secret", "sw", swHeaders(SW.wrong, "msg_r1", now, swBody(11)), swBody(11),
        "Invalid signature");
refused("sw: rotated-out secret", "sw", swHeaders(SW.retired, "msg_r2", now, swBody(12)),
        swBody(12), "Invalid signature");
refused("sw: expired timestamp", "sw", swHeaders(SW.active, "msg_r3", now - 301, swBody(13)),
        swBody(13), "Request timestamp expired");
refused("sw: future timestamp", "sw", swHeaders(SW.active, "msg_r4", now + 301, swBody(14)),
        swBody(14), "Request timestamp in the future");
{
  const body = swBody(15);
  const changed = body.replace("15", "16");  // one byte
  refused("sw: body changed by one byte", "sw", swHeaders(SW.active, "msg_r5", now, body),
          changed, "Invalid signature");
}
for (const [drop, error] of [["webhook-signature", "Missing webhook-signature header"],
                             ["webhook-id", "Missing webhook-id header"],
                             ["webhook-timestamp", "Missing webhook-timestamp header"]]) {
  const h = swHeaders(SW.active, "msg_r6", now, swBody(16));
  delete h[drop];
  refused("sw: no " + drop, "sw", h, swBody(16), error);
}
{
  const h = swHeaders(SW.active, "msg_r7", now, swBody(17));
  h["webhook-signature"] = h["webhook-signature"].replace("v1,", "v1;");
  refused("sw: malformed signature header", "sw", h, swBody(17),
          "Invalid webhook-signature header");
  const t = swHeaders(SW.active, "msg_r8", now, swBody(18));
  t["webhook-timestamp"] = new Date(now * 1000).toISOString();
  refused("sw: malformed timestamp", "sw", t, swBody(18), "Invalid timestamp format");
}

// Stripe: webhooks.generateTestHeaderString -> "t=<ts>,v1=<hex>".
const stripe = Stripe("sk_test_judge");
const stripeSign = (secret, payload, timestamp) =>
  ({ "Stripe-Signature": stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp }) });
const event = (id) => JSON.stringify({ id, object: "event", type: "invoice.paid",
                                      data: { object: { customer: "cus_1" } } });

accepted("stripe: signed with the active secret", "stripe",
         stripeSign(ST.active, event("evt_1"), now), event("evt_1"), "evt_1");
accepted("stripe: signed with the previous secret", "stripe",
         stripeSign(ST.previous, event("evt_2"), now), event("evt_2"), "evt_2");
{
  const good = stripeSign(ST.active, event("evt_3"), now)["Stripe-Signature"];
  const bad = stripeSign(ST.wrong, event("evt_3"), now)["Stripe-Signature"].split(",")[1];
  const [t, v1] = good.split(",");
  accepted("stripe: one bad and one good v1", "stripe",
           { "Stripe-Signature": [t, bad, v1].join(",") }, event("evt_3"), "evt_3");
}
cases.push({ name: "stripe: the same event again", source: "stripe",
             headers: stripeSign(ST.active, event("evt_1"), now + 5), body: event("evt_1"),
             status: 200, duplicate: true });
refused("stripe: wrong secret", "stripe", stripeSign(ST.wrong, event("evt_r1"), now),
        event("evt_r1"), "Invalid signature");
refused("stripe: rotated-out secret", "stripe", stripeSign(ST.retired, event("evt_r2"), now),
        event("evt_r2"), "Invalid signature");
refused("stripe: expired timestamp", "stripe", stripeSign(ST.active, event("evt_r3"), now - 301),
        event("evt_r3"), "Request timestamp expired");
refused("stripe: future timestamp", "stripe", stripeSign(ST.active, event("evt_r4"), now + 301),
        event("evt_r4"), "Request timestamp in the future");
refused("stripe: body changed by one byte", "stripe",
        stripeSign(ST.active, event("evt_r5"), now), event("evt_r6"), "Invalid signature");
refused("stripe: no Stripe-Signature", "stripe", {}, event("evt_r7"),
        "Missing Stripe-Signature header");
refused("stripe: no v1", "stripe",
        { "Stripe-Signature": stripeSign(ST.active, event("evt_r8"), now)["Stripe-Signature"]
                                  .replace("v1=", "v0=") },
        event("evt_r8"), "Invalid Stripe-Signature header");
refused("stripe: malformed timestamp", "stripe",
        { "Stripe-Signature": stripeSign(ST.active, event("evt_r9"), now)["Stripe-Signature"]
                                  .replace(/^t=\d+/, "t=later") },
        event("evt_r9"), "Invalid timestamp format");

fs.writeFileSync(out, JSON.stringify({ now, secrets: { sw: SW, stripe: ST }, cases }, null, 1));
