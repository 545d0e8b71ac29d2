DROP INDEX "users_username_lower_idx";--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "username_key" text;