/**
 * Versioned migrations of the service's own schema, applied at start. Effect's Migrator runs them in
 * one transaction under `LOCK TABLE … ACCESS EXCLUSIVE`, so two processes starting at once apply
 * each migration exactly once; creating the schema itself is serialised by an advisory lock.
 *
 * Longer than most modules on purpose: the migrations are a history read top to bottom, and a
 * migration once applied never changes, so splitting the list would only scatter it. `sql.unsafe` runs
 * their DDL, fixed text written here, because DDL takes no bound parameters.
 */
import { Effect } from "effect";
import { Migrator, SqlClient } from "effect/sql";
import { BILLING_SCHEMA } from "./client.ts";

const statements = (...parts: string[]) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    for (const part of parts) yield* sql.unsafe(part);
  });

export const migrations = {
  "0001_merchants_keys_idempotency": statements(
    `CREATE TABLE billing.merchants (
      id text PRIMARY KEY,
      name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
      created_at timestamptz NOT NULL DEFAULT now()
    )`,
    `CREATE TABLE billing.api_keys (
      id text PRIMARY KEY,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      livemode boolean NOT NULL,
      secret_sha256 bytea NOT NULL UNIQUE,
      redacted text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      revoked_at timestamptz
    )`,
    "CREATE INDEX api_keys_merchant ON billing.api_keys (merchant_id)",
    `CREATE TABLE billing.merchant_chains (
      id text PRIMARY KEY,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      chain_id bigint NOT NULL,
      livemode boolean NOT NULL,
      payout_address text NOT NULL,
      tokens text[] NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      superseded_at timestamptz
    )`,
    `CREATE UNIQUE INDEX merchant_chains_current ON billing.merchant_chains (merchant_id, chain_id)
      WHERE superseded_at IS NULL`,
    `CREATE TABLE billing.idempotency_keys (
      api_key_id text NOT NULL REFERENCES billing.api_keys (id),
      key text NOT NULL,
      request_sha256 bytea NOT NULL,
      method text NOT NULL,
      path text NOT NULL,
      status integer NOT NULL,
      response_body text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (api_key_id, key)
    )`,
    "CREATE INDEX idempotency_keys_created ON billing.idempotency_keys (created_at)",
  ),
  "0002_events": statements(
    `CREATE TABLE billing.events (
      id text PRIMARY KEY,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      livemode boolean NOT NULL,
      type text NOT NULL,
      created timestamptz NOT NULL,
      payload jsonb NOT NULL,
      fact_key text UNIQUE,
      chain_id bigint,
      block_number bigint,
      tx_hash text,
      log_index integer,
      inserted_at timestamptz NOT NULL DEFAULT clock_timestamp()
    )`,
    "CREATE INDEX events_merchant ON billing.events (merchant_id, id DESC)",
    "CREATE INDEX merchant_chains_payout ON billing.merchant_chains (chain_id, lower(payout_address))",
  ),
  "0003_relayer_transactions": statements(
    `CREATE TABLE billing.relayer_transactions (
      id text PRIMARY KEY,
      chain_id bigint NOT NULL,
      from_address text NOT NULL,
      nonce bigint NOT NULL,
      to_address text NOT NULL,
      data text NOT NULL,
      gas_limit numeric NOT NULL,
      max_fee_per_gas numeric NOT NULL,
      max_priority_fee_per_gas numeric NOT NULL,
      hashes text[] NOT NULL,
      raw text NOT NULL,
      purpose text NOT NULL,
      status text NOT NULL CHECK (status IN ('pending', 'mined', 'reverted', 'superseded')),
      block_number bigint,
      mined_hash text,
      created_at timestamptz NOT NULL DEFAULT now(),
      last_broadcast_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (chain_id, purpose),
      UNIQUE (chain_id, from_address, nonce)
    )`,
    "CREATE INDEX relayer_transactions_pending ON billing.relayer_transactions (chain_id) WHERE status = 'pending'",
  ),
  "0004_mandates_charges": statements(
    `CREATE TABLE billing.mandates (
      id text PRIMARY KEY,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      livemode boolean NOT NULL,
      origin text NOT NULL CHECK (origin IN ('api', 'chain')),
      chain_id bigint NOT NULL,
      token_address text NOT NULL,
      cap numeric(78, 0) NOT NULL CHECK (cap > 0),
      period text NOT NULL CHECK (period = 'month'),
      approval_periods integer NOT NULL CHECK (approval_periods > 0),
      customer text,
      reference text,
      payee_address text NOT NULL,
      operator_address text NOT NULL,
      hold_seconds bigint NOT NULL,
      anchor bigint NOT NULL,
      salt numeric(29, 0) NOT NULL,
      authorization_token text NOT NULL UNIQUE,
      status text NOT NULL CHECK (status IN ('pending', 'active', 'requires_authorization', 'revoked')),
      customer_address text,
      onchain_id text,
      signature_version bigint,
      approval_left numeric(78, 0),
      last_charged_period integer,
      authorized_at timestamptz,
      latest_charge text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (chain_id, onchain_id)
    )`,
    "CREATE INDEX mandates_merchant ON billing.mandates (merchant_id, livemode, id DESC)",
    "CREATE INDEX mandates_customer ON billing.mandates (merchant_id, customer)",
    `CREATE TABLE billing.charges (
      id text PRIMARY KEY,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      livemode boolean NOT NULL,
      mandate_id text NOT NULL REFERENCES billing.mandates (id),
      chain_id bigint NOT NULL,
      amount numeric(78, 0) NOT NULL CHECK (amount > 0),
      period integer NOT NULL,
      status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'released', 'returned', 'failed')),
      failure_code text,
      failure_message text,
      onchain_id text,
      relayer_purpose text,
      pending_action text CHECK (pending_action IN ('release', 'return')),
      pending_action_purpose text,
      release_at bigint,
      block_number bigint,
      block_hash text,
      tx_hash text,
      log_index integer,
      charged_at bigint,
      ended_block_number bigint,
      ended_tx_hash text,
      ended_log_index integer,
      ended_at bigint,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (chain_id, onchain_id)
    )`,
    "CREATE INDEX charges_mandate ON billing.charges (mandate_id, id DESC)",
    "CREATE INDEX charges_pending ON billing.charges (chain_id) WHERE status = 'pending'",
    "CREATE INDEX charges_held ON billing.charges (chain_id, release_at) WHERE status = 'succeeded' AND release_at IS NOT NULL",
    "CREATE INDEX events_merchant_type ON billing.events (merchant_id, livemode, type, inserted_at DESC)",
    "CREATE INDEX events_merchant_inserted ON billing.events (merchant_id, livemode, inserted_at DESC, id DESC)",
  ),
  "0005_webhooks": statements(
    `CREATE TABLE billing.webhook_endpoints (
      id text PRIMARY KEY,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      livemode boolean NOT NULL,
      url text NOT NULL,
      events text[] NOT NULL,
      description text,
      status text NOT NULL CHECK (status IN ('enabled', 'disabled')),
      secret_ciphertext bytea NOT NULL,
      previous_secret_ciphertext bytea,
      previous_secret_expires_at timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    )`,
    "CREATE INDEX webhook_endpoints_merchant ON billing.webhook_endpoints (merchant_id, livemode, id DESC) WHERE deleted_at IS NULL",
    `CREATE TABLE billing.webhook_deliveries (
      id text PRIMARY KEY,
      endpoint_id text NOT NULL REFERENCES billing.webhook_endpoints (id),
      event_id text NOT NULL REFERENCES billing.events (id),
      event_type text NOT NULL,
      trigger text NOT NULL CHECK (trigger IN ('event', 'replay', 'test')),
      status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
      attempt_count integer NOT NULL DEFAULT 0,
      next_attempt_at timestamptz,
      last_attempt_at timestamptz,
      created_at timestamptz NOT NULL
    )`,
    // Fan-out inserts each event once per endpoint; replays and tests add further deliveries.
    "CREATE UNIQUE INDEX webhook_deliveries_event_once ON billing.webhook_deliveries (endpoint_id, event_id) WHERE trigger = 'event'",
    "CREATE INDEX webhook_deliveries_due ON billing.webhook_deliveries (endpoint_id, next_attempt_at) WHERE status = 'pending'",
    "CREATE INDEX webhook_deliveries_endpoint ON billing.webhook_deliveries (endpoint_id, id DESC)",
    `CREATE TABLE billing.webhook_attempts (
      delivery_id text NOT NULL REFERENCES billing.webhook_deliveries (id),
      number integer NOT NULL,
      attempted_at timestamptz NOT NULL,
      status_code integer,
      duration_ms integer NOT NULL,
      error text,
      response_body text,
      PRIMARY KEY (delivery_id, number, attempted_at)
    )`,
  ),
  "0006_subscriptions": statements(
    `CREATE TABLE billing.prices (
      id text PRIMARY KEY,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      livemode boolean NOT NULL,
      product_name text NOT NULL,
      chain_id integer NOT NULL,
      token_address text NOT NULL,
      amount numeric(78, 0) NOT NULL CHECK (amount >= 0),
      usage_unit_amount numeric(78, 0) CHECK (usage_unit_amount > 0),
      usage_unit text,
      active boolean NOT NULL DEFAULT true,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`,
    "CREATE INDEX prices_merchant ON billing.prices (merchant_id, livemode, id DESC)",
    `CREATE TABLE billing.coupons (
      id text PRIMARY KEY,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      livemode boolean NOT NULL,
      name text,
      percent_off_bps integer CHECK (percent_off_bps BETWEEN 1 AND 10000),
      amount_off_decimal text,
      token_symbol text,
      duration_in_months integer NOT NULL CHECK (duration_in_months BETWEEN 1 AND 120),
      created_at timestamptz NOT NULL DEFAULT now(),
      CHECK ((percent_off_bps IS NULL) <> (amount_off_decimal IS NULL))
    )`,
    "CREATE INDEX coupons_merchant ON billing.coupons (merchant_id, livemode, id DESC)",
    `CREATE TABLE billing.subscriptions (
      id text PRIMARY KEY,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      livemode boolean NOT NULL,
      customer text NOT NULL,
      price_id text NOT NULL REFERENCES billing.prices (id),
      mandate_id text NOT NULL UNIQUE REFERENCES billing.mandates (id),
      chain_id integer NOT NULL,
      coupon_id text REFERENCES billing.coupons (id),
      discount_start_period integer,
      discount_end_period integer,
      status text NOT NULL CHECK (status IN ('incomplete', 'active', 'past_due', 'canceled')),
      current_period integer,
      next_billing_at bigint,
      cancel_at_period_end boolean NOT NULL DEFAULT false,
      canceled_at timestamptz,
      cancellation_reason text,
      latest_invoice text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`,
    "CREATE INDEX subscriptions_merchant ON billing.subscriptions (merchant_id, livemode, id DESC)",
    "CREATE INDEX subscriptions_due ON billing.subscriptions (chain_id, next_billing_at) WHERE status IN ('active', 'past_due')",
    "CREATE INDEX subscriptions_incomplete ON billing.subscriptions (mandate_id) WHERE status = 'incomplete'",
    `CREATE TABLE billing.invoices (
      id text PRIMARY KEY,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      livemode boolean NOT NULL,
      subscription_id text NOT NULL REFERENCES billing.subscriptions (id),
      period integer NOT NULL,
      period_start bigint NOT NULL,
      period_end bigint NOT NULL,
      status text NOT NULL CHECK (status IN ('open', 'paid', 'uncollectible', 'void')),
      lines jsonb NOT NULL,
      subtotal numeric(78, 0) NOT NULL,
      discount numeric(78, 0) NOT NULL,
      total numeric(78, 0) NOT NULL,
      charge_id text REFERENCES billing.charges (id),
      attempt_count integer NOT NULL DEFAULT 0,
      next_attempt_at bigint,
      first_failed_at bigint,
      paid_at bigint,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (subscription_id, period)
    )`,
    "CREATE INDEX invoices_merchant ON billing.invoices (merchant_id, livemode, id DESC)",
    "CREATE INDEX invoices_open ON billing.invoices (charge_id) WHERE status = 'open'",
  ),
  "0007_usage_records": statements(
    `CREATE TABLE billing.usage_records (
      id text PRIMARY KEY,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      livemode boolean NOT NULL,
      subscription_id text NOT NULL REFERENCES billing.subscriptions (id),
      period integer NOT NULL,
      quantity bigint NOT NULL CHECK (quantity > 0),
      status text NOT NULL CHECK (status IN ('billable', 'over_limit')),
      created_at timestamptz NOT NULL DEFAULT now()
    )`,
    "CREATE INDEX usage_records_subscription ON billing.usage_records (subscription_id, period, id DESC)",
  ),
  "0008_subscription_warnings": statements(
    // Chain times at which the advance warnings of the coming period are checked; NULL once checked.
    "ALTER TABLE billing.subscriptions ADD COLUMN at_risk_check_at bigint, ADD COLUMN discount_warning_at bigint",
    `CREATE INDEX subscriptions_at_risk ON billing.subscriptions (chain_id, at_risk_check_at)
      WHERE at_risk_check_at IS NOT NULL`,
    `CREATE INDEX subscriptions_discount_warning ON billing.subscriptions (chain_id, discount_warning_at)
      WHERE discount_warning_at IS NOT NULL`,
  ),
  "0009_outcome_worker_indexes": statements(
    // The charge outcome worker looks for pending charges whose transaction failed, and for pending
    // releases and returns, every pass: both from small sets, whatever the size of the history.
    `CREATE INDEX relayer_transactions_failed ON billing.relayer_transactions (chain_id, purpose)
      WHERE status IN ('reverted', 'superseded')`,
    `CREATE INDEX charges_pending_action ON billing.charges (chain_id, pending_action_purpose)
      WHERE pending_action IS NOT NULL`,
  ),
  "0010_relayer_attempts": statements(
    // An action (a return, an authorization with one nonce) may take several attempts, each a
    // transaction with its own purpose; at most one of them is live (pending) or mined at a time.
    "ALTER TABLE billing.relayer_transactions ADD COLUMN action text, ADD COLUMN spent_wei numeric",
    `UPDATE billing.relayer_transactions SET action = purpose
      WHERE purpose LIKE 'authorize:%' OR purpose LIKE 'return:%'`,
    `CREATE UNIQUE INDEX relayer_transactions_live_action ON billing.relayer_transactions (chain_id, action)
      WHERE action IS NOT NULL AND status IN ('pending', 'mined')`,
    // The hourly spending budget sums a chain's recent transactions.
    "CREATE INDEX relayer_transactions_recent ON billing.relayer_transactions (chain_id, from_address, created_at)",
    // Fixed-window request counters of the public authorization page, shared by every process.
    `CREATE TABLE billing.rate_limits (
      key text NOT NULL,
      window_start timestamptz NOT NULL,
      hits integer NOT NULL,
      PRIMARY KEY (key, window_start)
    )`,
  ),
  "0011_fact_relay_cursor": statements(
    // Per chain: the last fact the relay read (relayed, skipped or not ours) with earlier positions and
    // their block hashes to rewind to after a reorg (events/relay-cursor.ts), and the skipped count.
    `CREATE TABLE billing.fact_relay_cursors (
      chain_id bigint PRIMARY KEY,
      block_number bigint,
      log_index integer,
      fact_key text,
      block_hash text,
      anchors jsonb NOT NULL DEFAULT '[]',
      skipped_facts bigint NOT NULL DEFAULT 0,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`,
    // Facts of a merchant's payout address that the relay declined (unknown token, mandate or charge).
    `CREATE TABLE billing.skipped_facts (
      fact_key text PRIMARY KEY,
      chain_id bigint NOT NULL,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      kind text NOT NULL,
      reason text NOT NULL,
      payee text NOT NULL,
      block_number bigint NOT NULL,
      tx_hash text NOT NULL,
      log_index integer NOT NULL,
      skipped_at timestamptz NOT NULL DEFAULT now()
    )`,
    // A payout address seen for the first time on a chain: its facts the cursor already passed are
    // relayed once, from the indexer's payee index (progress in block_number, log_index, fact_key).
    `CREATE TABLE billing.fact_relay_backfills (
      chain_id bigint NOT NULL,
      payee text NOT NULL,
      block_number bigint,
      log_index integer,
      fact_key text,
      requested_at timestamptz NOT NULL DEFAULT now(),
      done_at timestamptz,
      PRIMARY KEY (chain_id, payee)
    )`,
    "CREATE INDEX fact_relay_backfills_pending ON billing.fact_relay_backfills (chain_id) WHERE done_at IS NULL",
    // Cursors start at the beginning of each chain, which covers every address registered so far.
    `INSERT INTO billing.fact_relay_backfills (chain_id, payee, done_at)
      SELECT DISTINCT chain_id, lower(payout_address), now() FROM billing.merchant_chains`,
  ),
  "0012_operator": statements(
    // The metrics scrape counts failed deliveries (pending ones are counted from webhook_deliveries_due).
    "CREATE INDEX webhook_deliveries_failed ON billing.webhook_deliveries (endpoint_id) WHERE status = 'failed'",
  ),
  "0013_payments": statements(
    // One-time payments, written by payments/payment-store.ts. Amounts in token base units; `received` is
    // confirmed and standing, `seen` waits at the deposit address or in an unconfirmed sweep.
    `CREATE TABLE billing.payments (
      id text PRIMARY KEY,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      livemode boolean NOT NULL,
      chain_id bigint NOT NULL,
      token_address text NOT NULL,
      payee_address text NOT NULL,
      operator_address text NOT NULL,
      hold_seconds bigint NOT NULL,
      onchain_id text NOT NULL,
      deposit_address text NOT NULL,
      page_token text NOT NULL UNIQUE,
      amount numeric(78, 0) NOT NULL CHECK (amount > 0),
      received numeric(78, 0) NOT NULL DEFAULT 0,
      seen numeric(78, 0) NOT NULL DEFAULT 0,
      held numeric(78, 0) NOT NULL DEFAULT 0,
      release_at bigint,
      status text NOT NULL CHECK (status IN ('requires_payment', 'processing', 'paid', 'underpaid', 'expired',
        'canceled', 'reversed')),
      closed boolean NOT NULL DEFAULT false,
      reference text,
      description text,
      expires_at bigint NOT NULL,
      watch_until bigint NOT NULL,
      created_block bigint NOT NULL,
      transitions integer NOT NULL DEFAULT 0,
      paid_at bigint,
      canceled_at bigint,
      sweep_due boolean NOT NULL DEFAULT false,
      sweeps integer NOT NULL DEFAULT 0,
      sweep_purpose text,
      pending_action text CHECK (pending_action IN ('release', 'return')),
      pending_action_purpose text,
      return_to text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (chain_id, deposit_address)
    )`,
    "CREATE INDEX payments_merchant ON billing.payments (merchant_id, livemode, id DESC)",
    "CREATE INDEX payments_reference ON billing.payments (merchant_id, livemode, reference, id DESC)",
    "CREATE INDEX payments_watched ON billing.payments (chain_id, watch_until)",
    "CREATE INDEX payments_sweep_due ON billing.payments (chain_id) WHERE sweep_due",
    "CREATE INDEX payments_open ON billing.payments (expires_at) WHERE NOT closed",
    "CREATE INDEX payments_held ON billing.payments (chain_id, release_at) WHERE held > 0",
    // Confirmed chain facts applied to a payment (sweeps, releases, returns); `standing` turns false when
    // a reorg took the fact out, and true again if it comes back.
    `CREATE TABLE billing.payment_facts (
      chain_id bigint NOT NULL,
      fact_key text NOT NULL,
      payment_id text NOT NULL REFERENCES billing.payments (id),
      kind text NOT NULL CHECK (kind IN ('received', 'released', 'returned')),
      amount numeric(78, 0) NOT NULL,
      block_number bigint NOT NULL,
      block_hash text NOT NULL,
      tx_hash text NOT NULL,
      log_index integer NOT NULL,
      timestamp bigint NOT NULL,
      standing boolean NOT NULL DEFAULT true,
      PRIMARY KEY (chain_id, fact_key)
    )`,
    "CREATE INDEX payment_facts_payment ON billing.payment_facts (payment_id, block_number, log_index)",
    "CREATE INDEX payment_facts_recent ON billing.payment_facts (chain_id, block_number) WHERE standing",
    // Payers' transfers to deposit addresses, as the deposit watcher saw them (tx, log, from, amount).
    `CREATE TABLE billing.payment_transfers (
      chain_id bigint NOT NULL,
      tx_hash text NOT NULL,
      log_index integer NOT NULL,
      payment_id text NOT NULL REFERENCES billing.payments (id),
      from_address text NOT NULL,
      amount numeric(78, 0) NOT NULL,
      block_number bigint NOT NULL,
      block_hash text NOT NULL,
      timestamp bigint NOT NULL,
      PRIMARY KEY (chain_id, tx_hash, log_index)
    )`,
    "CREATE INDEX payment_transfers_payment ON billing.payment_transfers (payment_id, block_number, log_index)",
    "CREATE INDEX payment_transfers_block ON billing.payment_transfers (chain_id, block_number)",
    // How far the deposit watcher has read each chain's token transfers.
    `CREATE TABLE billing.deposit_watch (
      chain_id bigint PRIMARY KEY,
      scanned_block bigint NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`,
  ),
  "0014_console_sessions": statements(
    // Console sign-ins, written by auth/console-sessions.ts; only the token's SHA-256 is kept.
    `CREATE TABLE billing.console_sessions (
      id text PRIMARY KEY,
      api_key_id text NOT NULL REFERENCES billing.api_keys (id),
      token_sha256 bytea NOT NULL UNIQUE,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      ended_at timestamptz
    )`,
  ),
  "0015_api_auth_revocations": statements(
    // Every process caches credentials briefly (db/cleared-caches.ts) and clears its caches on this
    // NOTIFY: sent, on commit, by whatever revokes or deletes a key or ends a session.
    `CREATE FUNCTION billing.notify_auth_revoked() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('billing_auth_revoked', TG_TABLE_NAME);
      RETURN NULL;
    END $$`,
    `CREATE TRIGGER api_keys_revoked AFTER UPDATE OF revoked_at ON billing.api_keys FOR EACH ROW
      WHEN (NEW.revoked_at IS DISTINCT FROM OLD.revoked_at) EXECUTE FUNCTION billing.notify_auth_revoked()`,
    `CREATE TRIGGER api_keys_deleted AFTER DELETE ON billing.api_keys FOR EACH ROW
      EXECUTE FUNCTION billing.notify_auth_revoked()`,
    `CREATE TRIGGER console_sessions_ended AFTER UPDATE OF ended_at, expires_at ON billing.console_sessions
      FOR EACH ROW WHEN (NEW.ended_at IS DISTINCT FROM OLD.ended_at OR NEW.expires_at < OLD.expires_at)
      EXECUTE FUNCTION billing.notify_auth_revoked()`,
  ),
  "0016_webhook_delivery_leases": statements(
    // A claim writes only the lease, a column outside every index, so it is a HOT update (no new entry
    // in the delivery indexes) when its page has room: at fillfactor 70 a third of the updates were HOT,
    // at 50 97% of claims (bench:webhooks), for twice the table's pages.
    "ALTER TABLE billing.webhook_deliveries ADD COLUMN leased_until timestamptz",
    "ALTER TABLE billing.webhook_deliveries SET (fillfactor = 50)",
  ),
  "0017_relayer_action_lookup": statements(
    // Every authorization looks up its action's latest attempt and counts the mandate's attempts of the
    // day (`starts_with(action, prefix)`): without an index both scanned every transaction of the chain,
    // so the page's cost grew with the relayer's history (2 ms each at 2,000 transactions).
    // text_pattern_ops serves the prefix as a range whatever the database's collation.
    `CREATE INDEX relayer_transactions_action ON billing.relayer_transactions (chain_id, action text_pattern_ops)
      WHERE action IS NOT NULL`,
  ),
  "0018_webhook_attempts_unchecked_reference": statements(
    // The record of an outcome writes the attempt row beside the update of its delivery row, in one
    // statement (webhooks/delivery-store.ts), and none for a delivery that is gone; the one delete removes
    // deliveries before their attempts. The foreign key added a check per attempt row (a query, and a lock
    // on the delivery row the same statement updates): 4.5 of 28 µs a delivery in the record's statement.
    "ALTER TABLE billing.webhook_attempts DROP CONSTRAINT webhook_attempts_delivery_id_fkey",
  ),
  "0019_webhook_delivery_unchecked_references": statements(
    // Deliveries are written by webhooks/delivery-store.ts alone: by fan-out, for events of the same
    // transaction and endpoints its join just read; by a replay, for an event it locked (FOR KEY SHARE)
    // and an endpoint it loaded; by a test send, for its own new event. Endpoints are never
    // deleted (deleted_at); events only by the local stack's crash recovery, which locks them and deletes
    // their deliveries first. The two foreign keys cost a check per delivery row (a query each, and a lock
    // written on each new event's row): 8 of 29 µs a delivery in the event writer's transaction.
    `ALTER TABLE billing.webhook_deliveries DROP CONSTRAINT webhook_deliveries_endpoint_id_fkey,
      DROP CONSTRAINT webhook_deliveries_event_id_fkey`,
  ),
  "0020_caches_cleared": statements(
    // One channel clears every cache a process keeps of rarely changing rows (db/cleared-caches.ts): the
    // credentials of 0015 and now the merchants' chain configurations, which every POST /v1/mandates
    // read. One channel, one listening connection per process, whatever is cached.
    `CREATE FUNCTION billing.notify_caches_cleared() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('billing_caches_cleared', TG_TABLE_NAME);
      -- Processes of the previous version, still running during an upgrade, hear revocations there.
      IF TG_TABLE_NAME <> 'merchant_chains' THEN
        PERFORM pg_notify('billing_auth_revoked', TG_TABLE_NAME);
      END IF;
      RETURN NULL;
    END $$`,
    "DROP TRIGGER api_keys_revoked ON billing.api_keys",
    "DROP TRIGGER api_keys_deleted ON billing.api_keys",
    "DROP TRIGGER console_sessions_ended ON billing.console_sessions",
    "DROP FUNCTION billing.notify_auth_revoked()",
    `CREATE TRIGGER api_keys_revoked AFTER UPDATE OF revoked_at ON billing.api_keys FOR EACH ROW
      WHEN (NEW.revoked_at IS DISTINCT FROM OLD.revoked_at) EXECUTE FUNCTION billing.notify_caches_cleared()`,
    `CREATE TRIGGER api_keys_deleted AFTER DELETE ON billing.api_keys FOR EACH ROW
      EXECUTE FUNCTION billing.notify_caches_cleared()`,
    `CREATE TRIGGER console_sessions_ended AFTER UPDATE OF ended_at, expires_at ON billing.console_sessions
      FOR EACH ROW WHEN (NEW.ended_at IS DISTINCT FROM OLD.ended_at OR NEW.expires_at < OLD.expires_at)
      EXECUTE FUNCTION billing.notify_caches_cleared()`,
    `CREATE TRIGGER merchant_chains_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
      ON billing.merchant_chains FOR EACH STATEMENT EXECUTE FUNCTION billing.notify_caches_cleared()`,
  ),
  "0021_invoice_round_indexes": statements(
    // The billing round's settle, lapse and retry steps look for open invoices every pass. During a
    // period boundary every due subscription has one, its charge pending on chain, so without these
    // each pass read all of them (34.7 ms a pass at 10,000 due, ten times that at 100,000): the
    // indexes hold only the invoices a step can act on now.
    // `charge_pending`: the invoice's charge has no outcome yet. linkCharges sets it from the charge;
    // the trigger clears it when the charge's outcome is recorded (a charge never becomes pending again).
    "ALTER TABLE billing.invoices ADD COLUMN charge_pending boolean NOT NULL DEFAULT false",
    `UPDATE billing.invoices i SET charge_pending = true FROM billing.charges c
      WHERE c.id = i.charge_id AND c.status = 'pending' AND i.status = 'open'`,
    `CREATE INDEX invoices_settling ON billing.invoices (id)
      WHERE status = 'open' AND charge_id IS NOT NULL AND NOT charge_pending`,
    `CREATE FUNCTION billing.clear_invoice_charge_pending() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      -- An array, not a join: the transition table has no statistics, and a join planned without them
      -- read every open invoice (a second per 500 charges at 10,000 due).
      UPDATE billing.invoices SET charge_pending = false
        WHERE charge_id = ANY (ARRAY(SELECT id FROM changed WHERE status <> 'pending'))
          AND status = 'open' AND charge_pending;
      RETURN NULL;
    END $$`,
    `CREATE TRIGGER charges_outcome_recorded AFTER UPDATE ON billing.charges
      REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION billing.clear_invoice_charge_pending()`,
    "CREATE INDEX invoices_lapsing ON billing.invoices (period_end) WHERE status = 'open'",
    `CREATE INDEX invoices_retry_due ON billing.invoices (next_attempt_at)
      WHERE status = 'open' AND next_attempt_at IS NOT NULL`,
  ),
  "0022_relayer_spending": statements(
    // The hourly budget read every transaction of the last hour on each submission (O(N) each, O(N²)
    // over a set-up of N authorisations). A running total per account and minute makes it at most
    // 60 rows per backend; a row per backend (pg_backend_pid) because the total is updated inside the
    // caller's transaction: one shared row would hold every concurrent submission (parallel charge
    // batches) on its row lock until the first one's caller commits.
    `CREATE TABLE billing.relayer_spending (
      chain_id bigint NOT NULL,
      from_address text NOT NULL,
      minute timestamptz NOT NULL,
      backend int NOT NULL,
      wei numeric NOT NULL,
      PRIMARY KEY (chain_id, from_address, minute, backend)
    )`,
    `INSERT INTO billing.relayer_spending (chain_id, from_address, minute, backend, wei)
      SELECT chain_id, from_address, date_bin('1 minute', created_at, timestamptz '2000-01-01 00:00:00+00'), 0,
        sum(coalesce(spent_wei, CASE WHEN status = 'superseded' THEN 0 ELSE gas_limit * max_fee_per_gas END))
      FROM billing.relayer_transactions WHERE created_at > now() - interval '2 hours'
      GROUP BY 1, 2, 3`,
  ),
  "0023_billing_autovacuum": statements(
    // A period boundary rewrites every due subscription and writes and settles an invoice for each
    // within a minute or two. Until vacuum, each old row version stays in the partial indexes the
    // billing round reads every pass (open invoices, due subscriptions); until analyse, plans keep the
    // statistics of before (`authorised` read every mandate with those taken while every subscription
    // was incomplete). The default waits for 20% of a table (40,000 invoices at 100,000 due, after the
    // boundary): these are vacuumed and analysed after 1% of their rows changed, at least 1,000.
    ...["invoices", "subscriptions"].map(
      (table) => `ALTER TABLE billing.${table} SET (autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_threshold = 1000, autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 1000)`,
    ),
    `ALTER TABLE billing.mandates SET (autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 1000)`,
  ),
  "0024_relayer_grouped_authorizations": statements(
    // Several authorisations in one authorizeMany transaction: each keeps a row of its own (its purpose
    // and action, so lookups, the live-action index and the per-mandate daily count keep their meaning)
    // that names the row of the transaction carrying it. An item shares its carrier's nonce and hashes
    // and costs nothing itself (the carrier counts against the budget), so the nonce is unique among
    // carriers and lone transactions only.
    "ALTER TABLE billing.relayer_transactions ADD COLUMN carrier_id text",
    `ALTER TABLE billing.relayer_transactions
      DROP CONSTRAINT relayer_transactions_chain_id_from_address_nonce_key`,
    `CREATE UNIQUE INDEX relayer_transactions_nonce ON billing.relayer_transactions (chain_id, from_address, nonce)
      WHERE carrier_id IS NULL`,
    "CREATE INDEX relayer_transactions_items ON billing.relayer_transactions (carrier_id) WHERE carrier_id IS NOT NULL",
  ),
  "0025_events_merchant_index_dropped": statements(
    // No statement reads events by (merchant_id, id): listing reads events_merchant_inserted or
    // events_merchant_type, which also serve the merchant foreign key. A billed subscription writes
    // three events, each paying an entry here that nothing read (56 MB at 100,000 due).
    "DROP INDEX billing.events_merchant",
  ),
  "0026_mandates_fillfactor": statements(
    // Every charge updates its mandate twice (its latest charge when sent, what is left when the chain
    // charged it), neither touching an indexed column. With full pages 61% of those updates found no
    // room on their page and wrote an entry in each of the mandate's indexes: room left on each page
    // keeps them HOT. Applies to pages written from now on.
    "ALTER TABLE billing.mandates SET (fillfactor = 80)",
  ),
  "0027_subscriptions_activation_due": statements(
    // The activate step looked for incomplete subscriptions whose mandate is no longer pending by reading
    // every incomplete subscription of the chain and its mandate, on every billing pass (every second,
    // and on every event): customers who never sign leave theirs incomplete for good, so each pass grew
    // with every abandoned checkout. `activation_due` is set when the mandate leaves `pending` (a row
    // trigger, which fires only for those rows), and a partial index holds only the incomplete
    // subscriptions it is set on. A subscription's mandate is created with it, pending, in the same
    // transaction, so no mandate can leave `pending` before its subscription exists.
    "ALTER TABLE billing.subscriptions ADD COLUMN activation_due boolean NOT NULL DEFAULT false",
    `UPDATE billing.subscriptions s SET activation_due = true FROM billing.mandates m
      WHERE m.id = s.mandate_id AND s.status = 'incomplete' AND m.status <> 'pending'`,
    `CREATE INDEX subscriptions_activation_due ON billing.subscriptions (chain_id)
      WHERE status = 'incomplete' AND activation_due`,
    `CREATE FUNCTION billing.mark_activation_due() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE billing.subscriptions SET activation_due = true
        WHERE mandate_id = NEW.id AND status = 'incomplete' AND NOT activation_due;
      RETURN NULL;
    END $$`,
    `CREATE TRIGGER mandates_left_pending AFTER UPDATE OF status ON billing.mandates
      FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status <> 'pending')
      EXECUTE FUNCTION billing.mark_activation_due()`,
  ),
  "0028_webhook_deliveries_event_once_dropped": statements(
    // Fan-out runs once per event, in the transaction that inserted it (the outbox hands on only the
    // events its insert returned, and an event id is inserted once), so nothing could ever conflict on
    // (endpoint_id, event_id). No statement read this partial index either: the lookups by event do not
    // name the trigger, so the planner cannot use it. Every delivery paid an entry in it, twice (the
    // insert, and the record of its outcome, which cannot be a HOT update). In bench:webhooks' burst,
    // inserting 2,000 deliveries took 16–25 ms without it against 26–37, recording a batch 2.3 ms
    // against 2.8–3.5.
    "DROP INDEX billing.webhook_deliveries_event_once",
  ),
  "0029_webhook_deliveries_by_event": statements(
    // The lookups by event (the listing's `event` filter, a replay's targets, the crash recovery's delete)
    // walked every delivery of the endpoint, or of the table: 20,000 rows read to find one
    // (test/domain/deliveries-by-event.test.ts), a cost an API caller could make the service pay at will
    // as history grows. Each delivery pays an entry here at its insert and at the record of its outcome.
    // IF NOT EXISTS: an operator with a large table builds it first with CONCURRENTLY (docs/operations.md, Upgrading),
    // since the build here holds the migration's transaction and blocks writes to deliveries. A concurrent
    // build that failed leaves an invalid index of that name: dropped here and built again.
    `DO $$ BEGIN
      IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                 JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = 'billing' AND c.relname = 'webhook_deliveries_event' AND NOT i.indisvalid)
      THEN DROP INDEX billing.webhook_deliveries_event;
      END IF;
    END $$`,
    "CREATE INDEX IF NOT EXISTS webhook_deliveries_event ON billing.webhook_deliveries (event_id)",
  ),
  "0030_relayer_transactions_recent_dropped": statements(
    // The hourly budget has read its running totals (relayer_spending, 0022) instead, and no statement
    // reads this index any more. Every transaction and every authorisation's item row paid an entry in
    // it. Worse, the per-mandate daily count (chain, action prefix, created_at) matched it too: a pooled
    // connection's cached plan, made before the table had statistics, could take it, scanning every
    // transaction of the chain (2.0 ms a count at 10,000 authorisations, against 0.03 through
    // relayer_transactions_action).
    "DROP INDEX billing.relayer_transactions_recent",
  ),
  "0031_blocked_transfers": statements(
    // An escrow transfer the chain refuses for one item (a token's blacklisted payout or deposit
    // address): why, since when (the episode, which keys its one event) and when it is tried next
    // (chains/blocked-transfers.ts). A charge's release; a payment's sweep and release.
    `ALTER TABLE billing.charges ADD COLUMN release_failure_code text,
      ADD COLUMN release_failure_message text, ADD COLUMN release_failed_since timestamptz,
      ADD COLUMN release_retry_at timestamptz`,
    `ALTER TABLE billing.payments ADD COLUMN sweep_failure_code text,
      ADD COLUMN sweep_failure_message text, ADD COLUMN sweep_failed_since timestamptz,
      ADD COLUMN sweep_retry_at timestamptz, ADD COLUMN release_failure_code text,
      ADD COLUMN release_failure_message text, ADD COLUMN release_failed_since timestamptz,
      ADD COLUMN release_retry_at timestamptz`,
    // The held-back items of a chain: read by each pass (is the address cleared?) and by /metrics.
    "CREATE INDEX charges_release_failed ON billing.charges (chain_id) WHERE release_failure_code IS NOT NULL",
    "CREATE INDEX payments_sweep_failed ON billing.payments (chain_id) WHERE sweep_failure_code IS NOT NULL",
    "CREATE INDEX payments_release_failed ON billing.payments (chain_id) WHERE release_failure_code IS NOT NULL",
  ),
  "0032_invoices_charged_short": statements(
    // A period charged by another charge (by hand, through the API) for less than its invoice leaves the
    // invoice open and partly paid, with no retry: the escrow takes one charge per period. What it got,
    // why its latest attempt failed, and the settle step's index without the invoices it has settled so.
    "ALTER TABLE billing.invoices ADD COLUMN amount_paid numeric(78, 0) NOT NULL DEFAULT 0, ADD COLUMN failure_code text",
    "DROP INDEX billing.invoices_settling",
    `CREATE INDEX invoices_settling ON billing.invoices (id)
      WHERE status = 'open' AND charge_id IS NOT NULL AND NOT charge_pending AND amount_paid = 0`,
  ),
  "0033_mandate_pending_cap": statements(
    // A raise of the cap the merchant asked for, waiting for the customer's signature (mandates.ts
    // `update`); the cap in force stays `cap` until the signature is on chain.
    `ALTER TABLE billing.mandates ADD COLUMN pending_cap numeric(78, 0) CHECK (pending_cap > cap),
      ADD COLUMN pending_cap_requested_at timestamptz`,
  ),
  "0034_subscription_lifecycle": statements(
    // Trials (`trialing` until the trial's end, which is the mandate's anchor), paused collection, the
    // credit a downgrade leaves, proration lines waiting for the next invoice, and one change not yet in
    // force (pending the customer's higher cap, or scheduled for the period's end). docs/subscriptions.md.
    `ALTER TABLE billing.subscriptions DROP CONSTRAINT subscriptions_status_check,
      ADD CONSTRAINT subscriptions_status_check
        CHECK (status IN ('incomplete', 'trialing', 'active', 'past_due', 'canceled'))`,
    `ALTER TABLE billing.subscriptions ADD COLUMN trial_start bigint, ADD COLUMN trial_end bigint,
      ADD COLUMN trial_notice_at bigint,
      ADD COLUMN pause_behavior text CHECK (pause_behavior IN ('void', 'mark_uncollectible')),
      ADD COLUMN pause_resumes_at bigint,
      ADD COLUMN credit_balance numeric(78, 0) NOT NULL DEFAULT 0 CHECK (credit_balance >= 0),
      ADD COLUMN prorations jsonb NOT NULL DEFAULT '[]',
      ADD COLUMN pending_change jsonb`,
    "DROP INDEX billing.subscriptions_due",
    `CREATE INDEX subscriptions_due ON billing.subscriptions (chain_id, next_billing_at)
      WHERE status IN ('trialing', 'active', 'past_due')`,
    // The billing round's lifecycle step reads only the few rows with something to do.
    `CREATE INDEX subscriptions_pending_change ON billing.subscriptions (chain_id)
      WHERE pending_change IS NOT NULL`,
    `CREATE INDEX subscriptions_trial_notice ON billing.subscriptions (chain_id, trial_notice_at)
      WHERE trial_notice_at IS NOT NULL`,
    `CREATE INDEX subscriptions_pause_resumes ON billing.subscriptions (chain_id, pause_resumes_at)
      WHERE pause_resumes_at IS NOT NULL`,
    // Usage is priced at the price in force when it was recorded, whatever the plan is when it is billed.
    "ALTER TABLE billing.usage_records ADD COLUMN price_id text REFERENCES billing.prices (id)",
    `UPDATE billing.usage_records u SET price_id = s.price_id FROM billing.subscriptions s
      WHERE s.id = u.subscription_id`,
    "ALTER TABLE billing.usage_records ALTER COLUMN price_id SET NOT NULL",
    // The subscription's credit before and after the invoice (base units).
    `ALTER TABLE billing.invoices ADD COLUMN starting_credit numeric(78, 0) NOT NULL DEFAULT 0,
      ADD COLUMN ending_credit numeric(78, 0) NOT NULL DEFAULT 0`,
  ),
  "0035_portal_sessions": statements(
    // The customer portal's links (service/portal/): a session scopes a page to (merchant, mode,
    // customer) until it expires. The link's token is kept only as its SHA-256: the URL is shown once.
    `CREATE TABLE billing.portal_sessions (
      id text PRIMARY KEY,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      livemode boolean NOT NULL,
      customer text NOT NULL,
      token_hash text NOT NULL UNIQUE,
      return_url text,
      subscription_cancel boolean NOT NULL,
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL
    )`,
    // Who asked for a subscription's cancellation: the merchant (api) or the customer (portal).
    `ALTER TABLE billing.subscriptions ADD COLUMN cancellation_source text
      CHECK (cancellation_source IN ('api', 'portal'))`,
    // The portal reads a customer's subscriptions (mandates have mandates_customer).
    "CREATE INDEX subscriptions_customer ON billing.subscriptions (merchant_id, customer)",
  ),
  "0036_relayer_gas_bounds": statements(
    // signed_at: when the bytes were last signed (a replacement signs again); a transaction's cost counts
    // in the hourly budget from that minute, so a replacement's fees count within the budget. Null on
    // older rows, which read created_at instead.
    // held_reason: why a pending transaction is held back: not sent while the base fee is above its fee
    // cap (fee_ceiling), or not replaced any more (replacement_limit, budget).
    // l1_fee_wei: the L1 data fee an OP-stack receipt reports (`l1Fee`), part of spent_wei.
    `ALTER TABLE billing.relayer_transactions ADD COLUMN signed_at timestamptz,
      ADD COLUMN held_reason text CHECK (held_reason IN ('fee_ceiling', 'replacement_limit', 'budget')),
      ADD COLUMN held_since timestamptz, ADD COLUMN l1_fee_wei numeric`,
    `CREATE INDEX relayer_transactions_held ON billing.relayer_transactions (chain_id, held_reason)
      WHERE held_reason IS NOT NULL`,
  ),
  "0037_gas_costs": statements(
    // What each relayer transaction carried, written by the caller in the transaction that submits it
    // (the owner tables' purpose columns are cleared or overwritten later): one row per object, keyed by
    // the purpose of the relayer row that carries it (an authorizeMany item's own purpose).
    `CREATE TABLE billing.gas_carried (
      chain_id bigint NOT NULL,
      purpose text NOT NULL,
      object_id text NOT NULL,
      object text NOT NULL CHECK (object IN ('charge', 'payment', 'mandate')),
      kind text NOT NULL,
      merchant_id text NOT NULL,
      livemode boolean NOT NULL,
      PRIMARY KEY (chain_id, purpose, object_id)
    )`,
    // One cost per final (mined or reverted) relayer transaction, kept for good: no foreign key to
    // relayer_transactions, and nothing prunes it (only the local stack's crash recovery forgets a chain).
    `CREATE TABLE billing.gas_costs (
      relayer_transaction_id text PRIMARY KEY,
      chain_id bigint NOT NULL,
      native_currency text NOT NULL,
      from_address text NOT NULL,
      transaction_hash text NOT NULL,
      block_number bigint NOT NULL,
      status text NOT NULL CHECK (status IN ('mined', 'reverted')),
      gas_used numeric NOT NULL,
      effective_gas_price numeric NOT NULL,
      l1_fee_wei numeric NOT NULL,
      total_wei numeric NOT NULL CHECK (total_wei = gas_used * effective_gas_price + l1_fee_wei),
      objects int NOT NULL,
      created_at timestamptz NOT NULL
    )`,
    "CREATE INDEX gas_costs_chain ON billing.gas_costs (chain_id, created_at)",
    // Each cost split over the objects it carried (merchant_id null: carried nothing known); the shares
    // of a cost sum to its total_wei.
    `CREATE TABLE billing.gas_cost_shares (
      id text PRIMARY KEY,
      relayer_transaction_id text NOT NULL REFERENCES billing.gas_costs,
      chain_id bigint NOT NULL,
      merchant_id text,
      livemode boolean,
      object text,
      object_id text,
      kind text NOT NULL,
      amount_wei numeric NOT NULL CHECK (amount_wei >= 0),
      created_at timestamptz NOT NULL
    )`,
    "CREATE INDEX gas_cost_shares_merchant ON billing.gas_cost_shares (merchant_id, livemode, id)",
    "CREATE INDEX gas_cost_shares_transaction ON billing.gas_cost_shares (relayer_transaction_id)",
  ),
  "0038_invoice_returns": statements(
    // A charge returned during its hold paid nothing: its invoice records what went back and is unpaid
    // again (settle-returned.ts). `return_pending` marks the invoices whose charge was returned and that
    // have not been settled for it, set by a trigger when the charge's return is recorded (as
    // `charge_pending` is cleared, migration 0021), so the step reads only those.
    `ALTER TABLE billing.invoices ADD COLUMN amount_returned numeric(78, 0) NOT NULL DEFAULT 0,
      ADD COLUMN returned_at bigint, ADD COLUMN return_pending boolean NOT NULL DEFAULT false`,
    `UPDATE billing.invoices i SET return_pending = true FROM billing.charges c
      WHERE c.id = i.charge_id AND c.status = 'returned' AND i.status IN ('open', 'paid')`,
    "CREATE INDEX invoices_return_pending ON billing.invoices (id) WHERE return_pending",
    `CREATE FUNCTION billing.mark_invoice_return_pending() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE billing.invoices SET return_pending = true
        WHERE charge_id = ANY (ARRAY(SELECT id FROM changed WHERE status = 'returned'))
          AND status IN ('open', 'paid') AND amount_returned = 0 AND NOT return_pending;
      RETURN NULL;
    END $$`,
    `CREATE TRIGGER charges_return_recorded AFTER UPDATE ON billing.charges
      REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION billing.mark_invoice_return_pending()`,
    // The settle step no longer takes a returned charge for payment.
    "DROP INDEX billing.invoices_settling",
    `CREATE INDEX invoices_settling ON billing.invoices (id)
      WHERE status = 'open' AND charge_id IS NOT NULL AND NOT charge_pending AND amount_paid = 0
        AND NOT return_pending`,
  ),
  "0039_restricted_keys": statements(
    // Read-only keys for finance (`rk_test_…`, `rk_live_…`): every GET, no change (auth/api-keys.ts).
    "ALTER TABLE billing.api_keys ADD COLUMN restricted boolean NOT NULL DEFAULT false",
  ),
  "0040_balance_transactions": statements(
    // The merchant's ledger (balances/balance-store.ts): one balance transaction per money movement of
    // a confirmed chain fact the relay applied, two entries under it (double entry: they sum to zero,
    // checked when the writing transaction commits). Rows are never deleted or changed but for
    // `standing`, cleared when a reorg's reversal (a row that `reverses` it) takes the movement back.
    `CREATE TABLE billing.balance_transactions (
      id text PRIMARY KEY,
      seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
      merchant_id text NOT NULL REFERENCES billing.merchants (id),
      livemode boolean NOT NULL,
      chain_id bigint NOT NULL,
      token_address text NOT NULL,
      currency text NOT NULL,
      decimals integer NOT NULL,
      type text NOT NULL CHECK (type IN ('charge', 'payment', 'release', 'payment_release', 'return',
        'payment_return')),
      balance_effect text NOT NULL CHECK (balance_effect IN ('pending', 'available', 'returned')),
      amount numeric(78, 0) NOT NULL,
      source_id text,
      invoice_id text,
      fact_key text NOT NULL,
      block_number bigint NOT NULL,
      block_hash text NOT NULL,
      tx_hash text NOT NULL,
      log_index integer NOT NULL,
      created bigint NOT NULL,
      available_on bigint NOT NULL,
      reverses text UNIQUE REFERENCES billing.balance_transactions (id),
      standing boolean NOT NULL DEFAULT true
    )`,
    `CREATE UNIQUE INDEX balance_transactions_fact ON billing.balance_transactions (fact_key)
      WHERE standing AND reverses IS NULL`,
    `CREATE INDEX balance_transactions_list ON billing.balance_transactions
      (merchant_id, livemode, created DESC, seq DESC)`,
    "CREATE INDEX balance_transactions_source ON billing.balance_transactions (source_id)",
    `CREATE INDEX balance_transactions_recent ON billing.balance_transactions (chain_id, block_number)
      WHERE reverses IS NULL`,
    `CREATE TABLE billing.ledger_entries (
      balance_transaction_id text NOT NULL REFERENCES billing.balance_transactions (id),
      account text NOT NULL CHECK (account IN ('customer', 'pending', 'available', 'returned')),
      amount numeric(78, 0) NOT NULL,
      PRIMARY KEY (balance_transaction_id, account)
    )`,
    `CREATE FUNCTION billing.check_ledger_entries() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM billing.ledger_entries e
          WHERE e.balance_transaction_id = NEW.balance_transaction_id
          GROUP BY e.balance_transaction_id HAVING sum(e.amount) <> 0 OR count(*) <> 2) THEN
        RAISE EXCEPTION 'the entries of balance transaction % do not balance', NEW.balance_transaction_id;
      END IF;
      RETURN NULL;
    END $$`,
    `CREATE CONSTRAINT TRIGGER ledger_entries_balance AFTER INSERT ON billing.ledger_entries
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION billing.check_ledger_entries()`,
    // Facts relayed before the ledger existed are replayed into it once per chain (facts/ledger-backfill.ts).
    `CREATE TABLE billing.ledger_backfills (
      chain_id bigint PRIMARY KEY,
      block_number numeric,
      log_index integer,
      fact_key text,
      done_at timestamptz
    )`,
    "CREATE INDEX invoices_charge ON billing.invoices (charge_id) WHERE charge_id IS NOT NULL",
    // A balance transaction shows the gas of the relayer transaction that moved it (its object's share).
    "CREATE INDEX gas_cost_shares_object ON billing.gas_cost_shares (object_id)",
  ),
  "0041_relayer_payer_and_merchant_bounds": statements(
    // The merchants a relayer transaction serves, each with how many of its objects it carries (parallel
    // arrays; null: none), and each merchant's part of the account's spending per minute and backend,
    // kept by the statements that keep relayer_spending (chains/relayer-shares.ts).
    "ALTER TABLE billing.relayer_transactions ADD COLUMN merchant_ids text[], ADD COLUMN merchant_objects int[]",
    `CREATE TABLE billing.relayer_merchant_spending (
      chain_id bigint NOT NULL,
      from_address text NOT NULL,
      merchant_id text NOT NULL,
      minute timestamptz NOT NULL,
      backend int NOT NULL,
      wei numeric NOT NULL,
      PRIMARY KEY (chain_id, from_address, merchant_id, minute, backend)
    )`,
    // The pay page's gasless transfers (and payers' wallet deployments) by payer and token, written with
    // the relayer's transaction of the purpose: what the payer has in flight, what its pending ones move,
    // and whether one reverted (payments/gasless-payers.ts).
    `CREATE TABLE billing.gasless_transfers (
      chain_id bigint NOT NULL,
      purpose text NOT NULL,
      kind text NOT NULL CHECK (kind IN ('transfer', 'wallet_deployment')),
      token_address text NOT NULL,
      payer_address text NOT NULL,
      value numeric(78, 0) NOT NULL,
      payment_id text NOT NULL,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (chain_id, purpose)
    )`,
    "CREATE INDEX gasless_transfers_payer ON billing.gasless_transfers (chain_id, payer_address)",
  ),
  "0042_api_limits": statements(
    // The API's request-rate token buckets (limits/request-buckets.ts), shared by every process. Unlogged:
    // a crash that loses them only refills them.
    `CREATE UNLOGGED TABLE billing.request_buckets (
      key text PRIMARY KEY,
      tokens double precision NOT NULL,
      at double precision NOT NULL,
      version bigint NOT NULL
    )`,
    // Per merchant and chain, at least as many as its open payments (payments/open-payments.ts): the
    // open ones when they were last counted, plus those created since.
    `CREATE TABLE billing.open_payment_counts (
      merchant_id text NOT NULL,
      chain_id bigint NOT NULL,
      bound integer NOT NULL,
      PRIMARY KEY (merchant_id, chain_id)
    )`,
    `CREATE INDEX payments_open_by_merchant ON billing.payments (merchant_id, chain_id)
      WHERE status IN ('requires_payment', 'processing')`,
    `INSERT INTO billing.open_payment_counts (merchant_id, chain_id, bound)
      SELECT merchant_id, chain_id, count(*) FROM billing.payments
      WHERE status IN ('requires_payment', 'processing') GROUP BY merchant_id, chain_id`,
  ),
  "0043_deposit_watch_tokens": statements(
    // The deposit watcher reads every transfer of the tokens that watched payments are in: each token of
    // a chain with its latest watch_until is one index probe, however many payments there are.
    "CREATE INDEX payments_watched_tokens ON billing.payments (chain_id, token_address, watch_until DESC)",
  ),
  "0044_usage_x402_nonce": statements(
    // Usage paid for with x402's mandate scheme: the client's nonce, so the same payment settled twice is
    // one record.
    "ALTER TABLE billing.usage_records ADD COLUMN x402_nonce text",
    "CREATE UNIQUE INDEX usage_records_x402_nonce ON billing.usage_records (subscription_id, x402_nonce) WHERE x402_nonce IS NOT NULL",
  ),
};

const ensureSchema = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  yield* sql.withTransaction(
    Effect.gen(function* () {
      yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`${BILLING_SCHEMA}.schema`}))`;
      yield* sql.unsafe(`CREATE SCHEMA IF NOT EXISTS ${BILLING_SCHEMA}`);
    }),
  );
});

export const runMigrations = Effect.gen(function* () {
  yield* ensureSchema;
  const run = Migrator.make({});
  return yield* run({
    loader: Migrator.fromRecord(migrations),
    table: `${BILLING_SCHEMA}.schema_migrations`,
  });
});
