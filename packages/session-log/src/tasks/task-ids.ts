import { randomBytes } from 'node:crypto';

/**
 * Task ids: 22 base64url characters, 128 random bits, so a task id can
 * serve as a bearer handle (SEP-2663 "Task ID unguessability") and still be
 * one safe subject token. The principal check comes on top.
 */
const TASK_ID = /^[A-Za-z0-9_-]{22}$/;

export function newTaskId(): string {
  return randomBytes(16).toString('base64url');
}

export function isTaskId(value: unknown): value is string {
  return typeof value === 'string' && TASK_ID.test(value);
}
