import { z } from 'zod';

/**
 * The enums the API, the gateway, the page and the database share, declared
 * once: each is an `as const` list, its zod enum (API schemas, the protocol
 * catalogue) and its type. The SQL CHECK constraints of migrations/001 repeat
 * the lists (a migration cannot import TypeScript); adding a value means a
 * migration that changes the CHECK as well as this file.
 */

/** `full`: board, video call and chat; `board_only`: board and chat, no video. */
export const LESSON_MODES = ['full', 'board_only'] as const;
export type LessonMode = (typeof LESSON_MODES)[number];
export const LessonModeSchema = z.enum(LESSON_MODES);

/** A partner's plan names the richest lesson mode it may create, so it has the same values. */
export const PLANS = LESSON_MODES;
export type Plan = LessonMode;
export const PlanSchema = z.enum(PLANS);

/** Which board tools the page offers (formulas, grid, vectors). */
export const SUBJECT_MODES = ['generic', 'math', 'physics'] as const;
export type SubjectMode = (typeof SUBJECT_MODES)[number];
export const SubjectModeSchema = z.enum(SUBJECT_MODES);

/** A participant's role in a lesson, from their link. */
export const ROLES = ['teacher', 'student'] as const;
export type Role = (typeof ROLES)[number];
export const RoleSchema = z.enum(ROLES);
