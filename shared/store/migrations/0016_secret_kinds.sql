-- Whether a secret's sealed value is bound to its kind in the KMS encryption context
-- (`sluice:kind`), so an IAM role can be allowed to open one kind only (the parse function,
-- `aws_credentials`). Rows sealed before are not: the migrate step seals them again with
-- their kind, and from then on every new value is sealed bound.
ALTER TABLE secrets ADD COLUMN kind_bound boolean NOT NULL DEFAULT false;
ALTER TABLE secrets ALTER COLUMN kind_bound SET DEFAULT true;
