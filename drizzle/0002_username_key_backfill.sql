-- Custom SQL migration file, put your code below! --
-- Usernames are stored in NFC from now on. A row whose NFC form would break the length check
-- keeps its spelling (its key below comes from NFKC either way).
UPDATE "users" SET "username" = normalize("username", NFC)
WHERE "username" IS NOT NFC NORMALIZED AND char_length(normalize("username", NFC)) BETWEEN 3 AND 20;
--> statement-breakpoint
-- The service computes keys in JavaScript (src/users/user.ts: NFKC, then toLowerCase). ICU's
-- root-locale lower() is the same full Unicode case mapping; the database's own collation may
-- lower ASCII only, or differ between servers.
CREATE FUNCTION "users_username_key"(username text) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT lower(normalize(username, NFKC) COLLATE "und-x-icu") $$;
--> statement-breakpoint
UPDATE "users" SET "username_key" = "users_username_key"("username");
--> statement-breakpoint
-- Names that now collide: the oldest account keeps the key; each later one gets its key
-- followed by U+001F and its id, which no valid username produces (control characters are
-- refused), so it keeps its name and still logs in by e-mail.
UPDATE "users" AS "later" SET "username_key" = "later"."username_key" || chr(31) || "later"."id"
FROM (SELECT "id", row_number() OVER (PARTITION BY "username_key" ORDER BY "id") AS "rank" FROM "users") AS "ranked"
WHERE "ranked"."id" = "later"."id" AND "ranked"."rank" > 1;
--> statement-breakpoint
-- During a rolling deploy, instances of the previous release insert without a key: ICU's
-- computes it. The service always sends its own. To be dropped a release later.
CREATE FUNCTION "users_username_key_fallback"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW."username_key" IS NULL THEN
    NEW."username_key" := "users_username_key"(NEW."username");
  END IF;
  RETURN NEW;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "users_username_key_fallback" BEFORE INSERT ON "users"
FOR EACH ROW EXECUTE FUNCTION "users_username_key_fallback"();
