"""The schema of a team ledger in PostgreSQL, its write functions and its roles.

Everything lives in the schema ``privmob``, owned by the custodian's database role (who runs
``privmob ledger init --ledger postgresql://...``). The tables are those of the SQLite ledger
(:mod:`privmob.privacy.ledger.schema`, :mod:`privmob.privacy.staging`,
:mod:`privmob.privacy.programme_ledger`) with the same columns; entries and budgets cannot be
updated, deleted or truncated (triggers, for the owner too).

Two group roles, created once per cluster and granted per database:

* ``privmob_analyst`` may read the tables and EXECUTE the ``SECURITY DEFINER`` functions of
  :data:`ANALYST_FUNCTIONS`: wait for a charge's locks, and ``charge``, its only write of
  entries, which decides their dataset, ids, place in the chain and unit on the server and
  refuses invalid costs, a signer that may not charge and what the budget cannot pay; in the
  charge's transaction only, store the dataset's people sketch (the one whose SHA-256 the
  charge's entries name) and use a programme allowance;
  record its own staged release and settle it (not another's). It holds no INSERT, UPDATE or
  DELETE on any table and cannot call ``append_entry`` (the custodian's import), so it can
  neither set a budget nor change or remove what was charged.
* ``privmob_auditor`` may only read (``ledger show``, ``verify``, ``export``).

``ledger grant ROLE --as analyst|auditor`` makes a login role a member of one of them.
"""

from __future__ import annotations

import re

from privmob.privacy.ledger.governance import PEOPLE_PARAM
from privmob.privacy.ledger.schema import SIGNED_TABLES
from privmob.privacy.ledger.spends import sql_condition
from privmob.privacy.ledger.trust import ANALYST as ANALYST_KEY
from privmob.privacy.ledger.trust import CUSTODIAN as CUSTODIAN_KEY
from privmob.privacy.people import _HEADER, _MAGIC

_SKETCH_HEADER = _HEADER.size
_SKETCH_MAGIC = _MAGIC

ANALYST = "privmob_analyst"
AUDITOR = "privmob_auditor"
SCHEMA_NAME = "privmob"

TABLES = f"""
CREATE SCHEMA {SCHEMA_NAME};
SET LOCAL search_path = {SCHEMA_NAME};
CREATE TABLE budgets (
    dataset     text PRIMARY KEY,
    epsilon     double precision NOT NULL,
    delta       double precision NOT NULL,
    unit        text NOT NULL,
    created_at  text NOT NULL,
    note        text,
    row_hash    text,
    signer      text,
    signature   text,
    CONSTRAINT valid_budget CHECK (epsilon >= 0 AND epsilon < 'Infinity' AND delta >= 0
                                   AND delta < 1)
);
CREATE TABLE releases (
    id              bigint PRIMARY KEY,
    dataset         text NOT NULL REFERENCES budgets(dataset),
    created_at      text NOT NULL,
    kind            text NOT NULL,
    epsilon         double precision NOT NULL,
    delta           double precision NOT NULL,
    rho             double precision,
    unit            text NOT NULL,
    release_epsilon double precision NOT NULL,
    release_delta   double precision NOT NULL,
    release_unit    text NOT NULL,
    group_size      integer,
    for_publication integer NOT NULL,
    description     text,
    params          text,
    input_fingerprint text,
    input_rows      bigint,
    output_dir      text,
    output_hashes   text,
    os_user         text,
    host            text,
    new_dataset_for_same_data integer NOT NULL DEFAULT 0,
    prev_hash       text,
    row_hash        text,
    nonce           text,
    signer          text,
    signature       text,
    CONSTRAINT valid_spend CHECK ({sql_condition()})
);
CREATE INDEX releases_fingerprint ON releases(input_fingerprint);
CREATE INDEX releases_dataset ON releases(dataset);
-- a dataset's latest entry that names its people sketch (ledger.governance.named_sketch)
CREATE INDEX releases_people ON releases(dataset, id) WHERE params LIKE '%"people_sketch"%';
CREATE TABLE ledger_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE staged_releases (
    id          bigserial PRIMARY KEY,
    dataset     text NOT NULL,
    staging     text NOT NULL,
    moves       text NOT NULL,
    replaced    text,
    pid         integer NOT NULL,
    host        text NOT NULL,
    state       text NOT NULL,
    entry_ids   text,
    spent       text,
    created_at  text NOT NULL,
    updated_at  text NOT NULL,
    owner       text NOT NULL DEFAULT session_user  -- the database role that staged it
);
-- what each dataset's entries add up to, kept by the write functions for the budget check of
-- ``charge``: epsilon and delta of the entries without rho (both accountings count them in
-- full), of all entries (the basic accounting), and the rho of those with one (zCDP)
CREATE TABLE charged_totals (
    dataset     text PRIMARY KEY,
    epsilon     double precision NOT NULL,
    delta       double precision NOT NULL,
    all_epsilon double precision NOT NULL DEFAULT 0,
    all_delta   double precision NOT NULL DEFAULT 0,
    rho         double precision NOT NULL DEFAULT 0,
    n_rho       bigint NOT NULL DEFAULT 0
);
CREATE TABLE programmes (
    dataset text PRIMARY KEY,
    recorded_at text NOT NULL,
    since_entry bigint NOT NULL,
    plan text NOT NULL
);
CREATE TABLE programme_allowances (
    id bigserial PRIMARY KEY,
    dataset text NOT NULL,
    kind text NOT NULL,
    reason text NOT NULL
);
-- binding: who is in each dataset (privmob.privacy.people): keyed sketches, never published
CREATE TABLE dataset_people (
    dataset text PRIMARY KEY,
    sketch bytea NOT NULL,
    updated text NOT NULL
);
CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the privacy ledger is append-only: % of % refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER releases_append_only BEFORE UPDATE OR DELETE ON releases
    FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER releases_no_truncate BEFORE TRUNCATE ON releases
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
CREATE TRIGGER budgets_fixed BEFORE UPDATE OR DELETE ON budgets
    FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER budgets_no_truncate BEFORE TRUNCATE ON budgets
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
"""


def _pg_columns(sqlite_columns: str) -> str:
    """An SQLite column list of :data:`privmob.privacy.ledger.schema.SIGNED_TABLES` in
    PostgreSQL's types (one definition of the signed records for both stores)."""
    out = re.sub(r"INTEGER PRIMARY KEY AUTOINCREMENT", "bigserial PRIMARY KEY", sqlite_columns)
    out = re.sub(r"\bINTEGER\b", "bigint", out)
    return re.sub(r"\bTEXT\b", "text", out)


#: the custodian's signed records (keys, checkpoints, families, approvals), append-only
SIGNED = "".join(
    f"CREATE TABLE {t} ({_pg_columns(cols)}\n);\n"
    f"CREATE TRIGGER {t}_append_only BEFORE UPDATE OR DELETE ON {t}\n"
    "    FOR EACH ROW EXECUTE FUNCTION refuse_change();\n"
    f"CREATE TRIGGER {t}_no_truncate BEFORE TRUNCATE ON {t}\n"
    "    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();\n"
    for t, cols in SIGNED_TABLES.items()
)

_DEFINER = f"LANGUAGE plpgsql SECURITY DEFINER SET search_path = {SCHEMA_NAME}, pg_temp"

#: the only writes an analyst's role can make; each checks what it can without the ledger's
#: arithmetic (which is privmob's, in Python, one code for both stores)
FUNCTIONS = f"""
CREATE FUNCTION lock_for_charge(p_dataset text) RETURNS void {_DEFINER} AS $$
BEGIN
    PERFORM 1 FROM budgets WHERE dataset = p_dataset FOR UPDATE;
    PERFORM 1 FROM ledger_meta WHERE key IN ('head_count', 'head_hash') FOR UPDATE;
END $$;
CREATE FUNCTION add_to_totals(r releases) RETURNS void {_DEFINER} AS $$
DECLARE
    with_rho boolean := r.rho IS NOT NULL;
BEGIN
    INSERT INTO charged_totals VALUES (
        r.dataset,
        CASE WHEN with_rho THEN 0 ELSE r.epsilon END,
        CASE WHEN with_rho THEN 0 ELSE r.delta END,
        r.epsilon, r.delta, COALESCE(r.rho, 0), CASE WHEN with_rho THEN 1 ELSE 0 END)
    ON CONFLICT (dataset) DO UPDATE
        SET epsilon = charged_totals.epsilon + excluded.epsilon,
            delta = charged_totals.delta + excluded.delta,
            all_epsilon = charged_totals.all_epsilon + excluded.all_epsilon,
            all_delta = charged_totals.all_delta + excluded.all_delta,
            rho = charged_totals.rho + excluded.rho,
            n_rho = charged_totals.n_rho + excluded.n_rho;
END $$;
-- the tight conversion of rho-zCDP to (epsilon, delta) (privacy/zcdp.py: the infimum over
-- alpha of the CKS 2020 bound, here by golden-section search on the same interval), for the
-- budget check of ``charge``; never more than the classical bound, never below 0
CREATE FUNCTION zcdp_epsilon(p_rho double precision, p_delta double precision)
RETURNS double precision LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    l double precision := ln(1 / p_delta);
    lo double precision := 1 + 1e-9;
    hi double precision;
    a double precision;
    b double precision;
    fa double precision;
    fb double precision;
    g double precision := (sqrt(5) - 1) / 2;
BEGIN
    IF p_rho <= 0 THEN
        RETURN 0;
    END IF;
    hi := greatest(4 * (1 + sqrt(l / p_rho)), 2);
    FOR i IN 1..200 LOOP
        a := hi - g * (hi - lo);
        b := lo + g * (hi - lo);
        fa := a * p_rho + (l + (a - 1) * ln(1 - 1 / a) - ln(a)) / (a - 1);
        fb := b * p_rho + (l + (b - 1) * ln(1 - 1 / b) - ln(b)) / (b - 1);
        IF fa <= fb THEN hi := b; ELSE lo := a; END IF;
    END LOOP;
    RETURN greatest(0, least(least(fa, fb), p_rho + 2 * sqrt(p_rho * l)));
END $$;
CREATE FUNCTION append_entry(p_row jsonb) RETURNS void {_DEFINER} AS $$
DECLARE
    r releases;
    head text;
    n bigint;
BEGIN
    SELECT value INTO head FROM ledger_meta WHERE key = 'head_hash' FOR UPDATE;
    SELECT value::bigint INTO n FROM ledger_meta WHERE key = 'head_count' FOR UPDATE;
    r := jsonb_populate_record(NULL::releases, p_row);
    IF r.row_hash IS NULL OR r.prev_hash IS NULL THEN
        RAISE EXCEPTION 'an entry must carry its chain hashes' USING ERRCODE = 'check_violation';
    END IF;
    IF NOT ({sql_condition("r")}) THEN
        RAISE EXCEPTION 'entry %: its cost is not a valid spend (epsilon %, delta %, rho %, %)',
            r.id, r.epsilon, r.delta, r.rho, 'each finite and >= 0, deltas below 1'
            USING ERRCODE = 'check_violation';
    END IF;
    IF (head = '' AND n <> 0) OR (head <> '' AND r.prev_hash <> head) THEN
        RAISE EXCEPTION 'entry % does not continue the chain at the ledger head', r.id
            USING ERRCODE = 'serialization_failure';
    END IF;
    IF r.id <= COALESCE((SELECT max(id) FROM releases), 0) THEN
        RAISE EXCEPTION 'entry id % was used before', r.id USING ERRCODE = 'unique_violation';
    END IF;
    INSERT INTO releases SELECT (r).*;
    PERFORM add_to_totals(r);
    PERFORM set_config('privmob.charged', r.dataset, true);  -- for store_people, this transaction
    UPDATE ledger_meta SET value = r.row_hash WHERE key = 'head_hash';
    UPDATE ledger_meta SET value = (n + 1)::text WHERE key = 'head_count';
END $$;
CREATE FUNCTION is_custodian() RETURNS boolean {_DEFINER} AS $$
BEGIN
    RETURN pg_has_role(session_user,
                       (SELECT nspowner FROM pg_namespace WHERE nspname = '{SCHEMA_NAME}'),
                       'MEMBER');
END $$;
CREATE FUNCTION charge(p_dataset text, p_entries jsonb) RETURNS bigint {_DEFINER} AS $$
DECLARE
    r releases;
    b budgets;
    e jsonb;
    root text;
    head text;
    n bigint;
    next_id bigint;
    signer_ok boolean;
    t record;
    basic_fits boolean;
    zcdp_fits boolean;
    named text;
    people text;
BEGIN
    -- the family's budget pays (links are the custodian's); its row and the head are locked
    root := COALESCE((SELECT family FROM dataset_links WHERE dataset = p_dataset), p_dataset);
    SELECT * INTO b FROM budgets WHERE dataset = root FOR UPDATE;
    IF NOT FOUND OR NOT EXISTS (SELECT 1 FROM budgets WHERE dataset = p_dataset) THEN
        RAISE EXCEPTION 'no privacy budget is set for dataset %', p_dataset
            USING ERRCODE = 'check_violation';
    END IF;
    SELECT value INTO head FROM ledger_meta WHERE key = 'head_hash' FOR UPDATE;
    SELECT value::bigint INTO n FROM ledger_meta WHERE key = 'head_count' FOR UPDATE;
    IF head = '' THEN  -- the first entry continues the ledger's genesis
        head := encode(sha256(convert_to('privmob-ledger:' ||
            (SELECT value FROM ledger_meta WHERE key = 'ledger_id'), 'UTF8')), 'hex');
    END IF;
    next_id := COALESCE((SELECT max(id) FROM releases), 0) + 1;
    IF jsonb_typeof(p_entries) IS DISTINCT FROM 'array' OR jsonb_array_length(p_entries) = 0
    THEN
        RAISE EXCEPTION 'a charge is a list of its entries' USING ERRCODE = 'check_violation';
    END IF;
    FOR e IN SELECT value FROM jsonb_array_elements(p_entries) LOOP
        r := jsonb_populate_record(NULL::releases, e);
        -- what the server decides of an entry: its dataset, id, place in the chain and unit
        IF r.dataset IS DISTINCT FROM p_dataset THEN
            RAISE EXCEPTION 'entry %: a charge of % cannot write an entry of %', r.id,
                p_dataset, r.dataset USING ERRCODE = 'check_violation';
        END IF;
        IF r.id IS DISTINCT FROM next_id THEN
            RAISE EXCEPTION 'entry %: the next entry is %', r.id, next_id
                USING ERRCODE = 'serialization_failure';
        END IF;
        IF r.prev_hash IS DISTINCT FROM head THEN
            RAISE EXCEPTION 'entry % does not continue the chain at the ledger head', r.id
                USING ERRCODE = 'serialization_failure';
        END IF;
        IF r.unit IS DISTINCT FROM b.unit THEN
            RAISE EXCEPTION 'entry %: its cost is not in the unit of the budget (%)', r.id,
                b.unit USING ERRCODE = 'check_violation';
        END IF;
        IF NOT COALESCE({sql_condition("r")}, false) THEN
            RAISE EXCEPTION 'entry %: its cost is not a valid spend (epsilon %, delta %, rho %, %)',
                r.id, r.epsilon, r.delta, r.rho, 'each finite and >= 0, deltas below 1'
                USING ERRCODE = 'check_violation';
        END IF;
        IF r.row_hash IS NULL OR r.nonce IS NULL OR r.signature IS NULL THEN
            RAISE EXCEPTION 'entry %: an entry carries its hash, nonce and signature', r.id
                USING ERRCODE = 'check_violation';
        END IF;
        -- their form (what they are worth is checked on every read: the server has no Ed25519
        -- and does not recompute privmob's canonical JSON, see docs/operations.md)
        IF r.row_hash !~ '^[0-9a-f]{{64}}$' OR r.nonce !~ '^[0-9a-f]{{32}}$'
           OR r.signature !~ '^[0-9a-f]{{128}}$' OR r.row_hash = r.prev_hash THEN
            RAISE EXCEPTION 'entry %: its hash, nonce or signature is not of an entry', r.id
                USING ERRCODE = 'check_violation';
        END IF;
        -- signed by a key whose last event is a grant as analyst or custodian
        SELECT action = 'grant' AND role IN ('{ANALYST_KEY}', '{CUSTODIAN_KEY}') INTO signer_ok
          FROM ledger_keys WHERE key_id = r.signer ORDER BY seq DESC LIMIT 1;
        IF NOT COALESCE(signer_ok, false) THEN
            RAISE EXCEPTION 'entry %: signed by % which may not charge this ledger', r.id,
                r.signer USING ERRCODE = 'insufficient_privilege';
        END IF;
        -- the people sketch the entries name (its SHA-256), for store_people in this charge
        named := substring(r.params from '"{PEOPLE_PARAM}": "([0-9a-f]{{64}})"');
        IF named IS NOT NULL THEN
            IF people IS NOT NULL AND people <> named THEN
                RAISE EXCEPTION 'entry %: the entries of one charge name one people sketch', r.id
                    USING ERRCODE = 'check_violation';
            END IF;
            people := named;
        END IF;
        INSERT INTO releases SELECT (r).*;
        PERFORM add_to_totals(r);
        head := r.row_hash;
        n := n + 1;
        next_id := next_id + 1;
    END LOOP;
    -- the family's totals with this charge fit the budget by one of the two accountings
    -- (privacy/ledger/accounting.py): basic composition, or zCDP (the rho of the entries with
    -- one, converted at the delta the others leave, plus their epsilon); the zCDP side with a
    -- relative slack of 1e-6, so that the server never refuses what privmob found fits
    SELECT COALESCE(sum(c.epsilon), 0) AS rest_epsilon, COALESCE(sum(c.delta), 0) AS rest_delta,
           COALESCE(sum(c.all_epsilon), 0) AS all_epsilon,
           COALESCE(sum(c.all_delta), 0) AS all_delta,
           COALESCE(sum(c.rho), 0) AS rho, COALESCE(sum(c.n_rho), 0) AS n_rho INTO t
      FROM charged_totals c
     WHERE c.dataset IN (SELECT root UNION SELECT dataset FROM dataset_links WHERE family = root);
    basic_fits := t.all_epsilon <= b.epsilon * (1 + 1e-9)
                  AND t.all_delta <= b.delta * (1 + 1e-9) + 1e-300;
    zcdp_fits := t.n_rho > 0 AND b.delta - t.rest_delta > 0 AND b.delta - t.rest_delta < 1
                 AND t.rho < 'Infinity'
                 AND t.rest_epsilon + zcdp_epsilon(t.rho, b.delta - t.rest_delta)
                     <= b.epsilon * (1 + 1e-6);
    IF NOT (basic_fits OR zcdp_fits) THEN
        RAISE EXCEPTION 'the budget of % cannot pay this charge', root
            USING ERRCODE = 'check_violation';
    END IF;
    UPDATE ledger_meta SET value = head WHERE key = 'head_hash';
    UPDATE ledger_meta SET value = n::text WHERE key = 'head_count';
    PERFORM set_config('privmob.charged', p_dataset, true);  -- this transaction's charge
    PERFORM set_config('privmob.people_sketch', COALESCE(people, ''), true);  -- and its sketch
    RETURN n;
END $$;
CREATE FUNCTION stage_begin(p_row jsonb) RETURNS bigint {_DEFINER} AS $$
DECLARE
    r staged_releases;
    new_id bigint;
BEGIN
    r := jsonb_populate_record(NULL::staged_releases, p_row);
    INSERT INTO staged_releases (dataset, staging, moves, replaced, pid, host, state,
                                 created_at, updated_at, owner)
    VALUES (r.dataset, r.staging, r.moves, r.replaced, r.pid, r.host, 'writing',
            r.created_at, r.updated_at, session_user)
    RETURNING id INTO new_id;
    RETURN new_id;
END $$;
CREATE FUNCTION stage_update(p_id bigint, p_state text, p_entry_ids text, p_spent text,
                             p_from text, p_now text) RETURNS void {_DEFINER} AS $$
BEGIN
    IF p_state NOT IN ('charged', 'published', 'discarded', 'abandoned') THEN
        RAISE EXCEPTION 'no staged state %', p_state USING ERRCODE = 'check_violation';
    END IF;
    -- a staged release is settled by whoever staged it, or the custodian
    IF EXISTS (SELECT 1 FROM staged_releases WHERE id = p_id AND owner <> session_user)
       AND NOT is_custodian() THEN
        RAISE EXCEPTION 'staged release % is not yours', p_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_state = 'charged' AND NOT is_custodian()
       AND current_setting('privmob.charged', true) IS DISTINCT FROM
           (SELECT dataset FROM staged_releases WHERE id = p_id) THEN
        RAISE EXCEPTION 'a staged release is marked charged by its charge only'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE staged_releases
       SET state = p_state, entry_ids = COALESCE(p_entry_ids, entry_ids),
           spent = COALESCE(p_spent, spent), updated_at = p_now
     WHERE id = p_id AND (p_from IS NULL OR state = p_from);
END $$;
CREATE FUNCTION use_allowance(p_dataset text, p_kind text, p_other text) RETURNS boolean
{_DEFINER} AS $$
DECLARE
    used bigint;
BEGIN
    -- an allowance is used by the charge of its dataset, in the charge's transaction
    IF NOT is_custodian()
       AND current_setting('privmob.charged', true) IS DISTINCT FROM p_dataset THEN
        RAISE EXCEPTION 'an allowance is used with a charge of its dataset only'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    DELETE FROM programme_allowances WHERE id = (
        SELECT id FROM programme_allowances
         WHERE dataset = p_dataset AND kind IN (p_kind, p_other) ORDER BY id LIMIT 1
           FOR UPDATE)
    RETURNING id INTO used;
    RETURN used IS NOT NULL;
END $$;
CREATE FUNCTION store_people(p_dataset text, p_sketch bytea, p_now text) RETURNS void
{_DEFINER} AS $$
BEGIN
    -- an analyst stores the sketch of the dataset she charged in this transaction only
    IF NOT is_custodian()
       AND current_setting('privmob.charged', true) IS DISTINCT FROM p_dataset THEN
        RAISE EXCEPTION 'a people sketch is stored with a charge of its dataset only'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- and only the sketch that charge's signed entries name (ledger.governance.PEOPLE_PARAM)
    IF NOT is_custodian()
       AND encode(sha256(p_sketch), 'hex') IS DISTINCT FROM
           NULLIF(current_setting('privmob.people_sketch', true), '') THEN
        RAISE EXCEPTION 'a people sketch is stored only as the entries of its charge name it'
            USING ERRCODE = 'check_violation';
    END IF;
    IF length(p_sketch) < {_SKETCH_HEADER} OR (length(p_sketch) - {_SKETCH_HEADER}) % 8 <> 0
       OR substring(p_sketch from 1 for {len(_SKETCH_MAGIC)}) <> '\\x{_SKETCH_MAGIC.hex()}'::bytea
    THEN
        RAISE EXCEPTION 'not a people sketch' USING ERRCODE = 'check_violation';
    END IF;
    -- a merged bottom-k sketch never has fewer values than the one it merged into
    IF EXISTS (SELECT 1 FROM dataset_people
                WHERE dataset = p_dataset AND length(sketch) > length(p_sketch)) THEN
        RAISE EXCEPTION 'a people sketch never shrinks' USING ERRCODE = 'check_violation';
    END IF;
    INSERT INTO dataset_people (dataset, sketch, updated) VALUES (p_dataset, p_sketch, p_now)
    ON CONFLICT (dataset) DO UPDATE SET sketch = excluded.sketch, updated = excluded.updated;
END $$;
"""

#: what the analyst's role may EXECUTE: wait for a charge's locks, charge, stage and settle its
#: own release; ``append_entry`` (a raw entry, for an import) is the custodian's only
ANALYST_FUNCTIONS = (
    "lock_for_charge(text)",
    "charge(text, jsonb)",
    "stage_begin(jsonb)",
    "stage_update(bigint, text, text, text, text, text)",
    "use_allowance(text, text, text)",
    "store_people(text, bytea, text)",
)


def roles_sql() -> str:
    """Create the two group roles if the cluster has none yet, and give them their rights on
    this database's ledger (nothing to PUBLIC)."""
    create = "\n".join(
        f"IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{r}') THEN "
        f"CREATE ROLE {r} NOLOGIN; END IF;"
        for r in (ANALYST, AUDITOR)
    )
    grants = [
        f"REVOKE ALL ON SCHEMA {SCHEMA_NAME} FROM PUBLIC",
        f"REVOKE ALL ON ALL TABLES IN SCHEMA {SCHEMA_NAME} FROM PUBLIC",
        f"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {SCHEMA_NAME} FROM PUBLIC",
        f"GRANT USAGE ON SCHEMA {SCHEMA_NAME} TO {ANALYST}, {AUDITOR}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {SCHEMA_NAME} TO {ANALYST}, {AUDITOR}",
        *(f"GRANT EXECUTE ON FUNCTION {SCHEMA_NAME}.{f} TO {ANALYST}" for f in ANALYST_FUNCTIONS),
    ]
    return f"DO $$ BEGIN\n{create}\nEND $$;\n" + ";\n".join(grants) + ";\n"
