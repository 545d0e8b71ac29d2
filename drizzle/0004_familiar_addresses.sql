CREATE TABLE "familiar_addresses" (
	"user_id" integer NOT NULL,
	"address" text NOT NULL,
	"last_seen" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "familiar_addresses_pkey" PRIMARY KEY("user_id","address")
);
--> statement-breakpoint
ALTER TABLE "familiar_addresses" ADD CONSTRAINT "familiar_addresses_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;