import { z } from 'zod';
import { BOARD_LIMITS as L } from './limits.js';

/**
 * The board's own element and operation format, version 1
 * (docs/snapshot-format.md). The same schemas validate operations on the
 * server, type the participant page (web/), and describe the snapshot in the
 * OpenAPI document. This module imports nothing but zod so the page can bundle it.
 */
export const SNAPSHOT_FORMAT = 'lesson-board';
export const SNAPSHOT_VERSION = 1;

/** The highest element version (the stored column is a 32-bit integer): nothing the server derives goes past it. */
export const MAX_VERSION = 2 ** 31 - 1;
/**
 * How far one write may raise an element's version above the stored one (a new element's above 0).
 * The editor bumps an element's version once per change; between two sends that is at most a few
 * thousand (a 4,000-point stroke), far below this (docs/board.md, "Who keeps the board").
 */
export const VERSION_STEP = 100_000;
/**
 * The highest version a student's write may carry: everything above is the teacher's room, so a
 * teacher's write of any element can always be stamped one above what is stored.
 */
export const STUDENT_MAX_VERSION = 2 ** 30;

export const IdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'id: 1-64 chars of A-Z a-z 0-9 _ -');
/** Fractional index: stacking order within a page, compared as plain bytes. */
export const ZSchema = z.string().regex(/^[0-9A-Za-z]{1,80}$/, 'z: 1-80 base62 chars');
const coord = z.number().finite().min(-L.coordinate).max(L.coordinate);
const size = z.number().finite().min(0).max(L.size);
const color = z.string().regex(/^(#[0-9a-fA-F]{6}|transparent)$/, 'colour: #rrggbb or transparent');
const point = z.tuple([coord, coord]);
/** freehand points may carry a pen pressure 0..1 as a third value */
export const PenPointSchema = z.union([z.tuple([coord, coord]), z.tuple([coord, coord, z.number().min(0).max(1)])]);

export const StyleSchema = z
  .object({
    stroke: color.default('#1e1e1e'),
    fill: color.default('transparent'),
    stroke_width: z.number().min(0.5).max(32).default(2),
    stroke_style: z.enum(['solid', 'dashed', 'dotted']).default('solid'),
    fill_style: z.enum(['solid', 'hachure', 'cross-hatch']).default('solid'),
    /** percent */
    opacity: z.number().int().min(0).max(100).default(100),
  })
  .strict()
  .meta({ id: 'BoardStyle' });

const base = {
  id: IdSchema,
  page_id: IdSchema,
  z: ZSchema,
  x: coord,
  y: coord,
  /** rotation in radians, clockwise, around the element's centre */
  angle: z.number().finite().min(-10).max(10).default(0),
  style: StyleSchema.default(StyleSchema.parse({})),
  locked: z.boolean().default(false),
  /**
   * Excalidraw's own versioning (docs/board.md, "Sync model"): `version` grows
   * with every change of the element; `version_nonce` is random per change and
   * breaks ties (the lower wins), so concurrent writes converge the way
   * Excalidraw's reconcileElements converges them.
   */
  version: z.number().int().min(1).max(MAX_VERSION),
  version_nonce: z.number().int().min(-(2 ** 31)).max(2 ** 31 - 1),
};

export const FreehandSchema = z
  .object({ ...base, type: z.literal('freehand'), points: z.array(PenPointSchema).min(1).max(L.freehandPoints) })
  .strict();
/**
 * Corners (a rectangle's, a diamond's) and bends (a line's or arrow's, through its points): `sharp`
 * or `round` (Excalidraw's "Edges" and its arrow type, sharp or curved). Absent: what elements
 * stored before the field existed were shown as: a rectangle's and a diamond's round, a line's
 * and an arrow's sharp. An ellipse has none.
 */
const edges = z.enum(['sharp', 'round']).optional();

/** An element's corners or bends as shown: its `edges`, or when absent what it was shown as before the field. */
export function edgesOf(el: { type: string; edges?: 'sharp' | 'round' }): 'sharp' | 'round' {
  return el.edges ?? (el.type === 'line' || el.type === 'arrow' ? 'sharp' : 'round');
}

/**
 * The optional element fields added to the format since nodes began to list them (2026-11-29): a
 * node sends the list in every `board.state` (`optional_fields`), and a page leaves out of what it
 * sends any of them the node does not list. A node from before a field would refuse an element
 * that carries it (the schemas are strict), and a page served by a newer node can reach an older
 * one during a rolling deploy. Every field added from now on goes here. (`container_id` and the
 * bindings are older than the list: every node keeps them.)
 */
export const OPTIONAL_ELEMENT_FIELDS = ['vertical_align', 'edges'] as const;
export const ShapeSchema = z
  .object({ ...base, type: z.enum(['rectangle', 'ellipse', 'diamond']), width: size, height: size, edges })
  .strict()
  .refine((el) => el.type !== 'ellipse' || el.edges === undefined, { message: 'an ellipse has no edges', path: ['edges'] });
const arrowhead = z.enum(['none', 'arrow', 'triangle', 'dot', 'bar']);
/**
 * An end of a line or arrow attached to another element (Excalidraw's
 * PointBinding): the line follows that element when it moves. `focus` (-1..1)
 * is where the line, extended, passes the element (0: through its centre);
 * `gap` is the distance kept from its outline. The points stay the truth for
 * drawing: a reader that ignores the binding draws the line where it is.
 */
export const BindingSchema = z
  .object({ element_id: IdSchema, focus: z.number().finite().min(-1).max(1), gap: size })
  .strict()
  .meta({ id: 'BoardBinding' });
export type Binding = z.infer<typeof BindingSchema>;
export const LineSchema = z
  .object({
    ...base,
    type: z.enum(['line', 'arrow']),
    points: z.array(point).min(2).max(L.linePoints),
    start_arrowhead: arrowhead.default('none'),
    end_arrowhead: arrowhead.default('none'),
    /** absent: that end is free */
    start_binding: BindingSchema.optional(),
    end_binding: BindingSchema.optional(),
    edges,
  })
  .strict();
export const TextSchema = z
  .object({
    ...base,
    type: z.literal('text'),
    text: z.string().min(1).max(L.textChars),
    font_size: z.number().min(4).max(400).default(20),
    font_family: z.enum(['hand', 'sans', 'code']).default('hand'),
    align: z.enum(['left', 'center', 'right']).default('left'),
    width: size,
    height: size,
    /**
     * The shape (or arrow) this text is the label of: it moves with it. Absent:
     * a free text. x, y, width, height are still the text's own box.
     */
    container_id: IdSchema.optional(),
    /**
     * Where a label sits in its shape's height (Excalidraw's vertical align): `top` or `bottom`.
     * Absent: the middle. Only on a label (a free text has none).
     */
    vertical_align: z.enum(['top', 'bottom']).optional(),
  })
  .strict()
  .refine((el) => el.container_id !== undefined || el.vertical_align === undefined, { message: 'only a label has a vertical_align', path: ['vertical_align'] });
export const FormulaSchema = z
  .object({
    ...base,
    type: z.literal('formula'),
    latex: z.string().min(1).max(L.latexChars),
    font_size: z.number().min(4).max(400).default(24),
    width: size,
    height: size,
  })
  .strict();
export const VectorSchema = z
  .object({
    ...base,
    type: z.literal('vector'),
    /** the vector runs from (x, y) to (x + dx, y + dy) */
    dx: coord,
    dy: coord,
    label: z.string().max(L.labelChars).default(''),
    magnitude: z.number().finite().nullable().default(null),
    unit: z.string().max(L.unitChars).default(''),
  })
  .strict();

/** A file of the lesson (docs/snapshot-format.md, "Files"): the hex sha-256 of its stored bytes. */
export const FileIdSchema = z.string().regex(/^[0-9a-f]{64}$/, 'file_id: 64 hex digits (sha-256)');
/** The part of the image shown, in the image's own pixels (Excalidraw's ImageCrop). */
export const CropSchema = z
  .object({ x: size, y: size, width: size, height: size, natural_width: size, natural_height: size })
  .strict()
  .meta({ id: 'BoardImageCrop' });
const flip = z.union([z.literal(1), z.literal(-1)]);
/**
 * An image (Excalidraw's `image` element): the file `file_id` of the lesson drawn into the box,
 * mirrored by `scale` (-1: flipped on that axis) and cut to `crop` (null: the whole image).
 * `status`: `pending` while its author's upload is on its way (everyone shows a placeholder; the
 * `file_id` is then the author's own and may never become a file), `saved` once the file is in the
 * lesson. A reference may dangle like an element reference: readers draw a placeholder.
 */
export const ImageSchema = z
  .object({
    ...base,
    type: z.literal('image'),
    width: size,
    height: size,
    file_id: FileIdSchema,
    status: z.enum(['pending', 'saved']).default('saved'),
    scale: z.tuple([flip, flip]).default([1, 1]),
    crop: CropSchema.nullable().default(null),
  })
  .strict();

const shapes = [FreehandSchema, ShapeSchema, LineSchema, TextSchema, FormulaSchema, VectorSchema, ImageSchema] as const;
export const ElementSchema = z.discriminatedUnion('type', shapes).meta({ id: 'BoardElement' });
/**
 * The element types of the format. A node lists those it keeps in every `board.state`
 * (`element_types`); a page holds back writes of any other (docs/board.md, "Images during a rolling
 * deploy"). A node from before the list keeps all but `image`: NODE_TYPES_BEFORE_LIST.
 */
export const ELEMENT_TYPES: readonly string[] = shapes.flatMap((s) => {
  const t = s.shape.type;
  return 'options' in t ? [...(t.options as string[])] : [t.value as string];
});
export const NODE_TYPES_BEFORE_LIST: readonly string[] = ELEMENT_TYPES.filter((t) => t !== 'image');
export type BoardElement = z.infer<typeof ElementSchema>;

/** The element without the optional fields a node does not keep (`keeps`: what its board.state listed). */
export function forNode(el: BoardElement, keeps: ReadonlySet<string>): BoardElement {
  let out: Record<string, unknown> | null = null;
  for (const f of OPTIONAL_ELEMENT_FIELDS) {
    if (f in el && !keeps.has(f)) {
      out ??= { ...el };
      delete out[f];
    }
  }
  return (out as BoardElement | null) ?? el;
}

/**
 * Ids of the other elements an element points at (a label's shape, an arrow's
 * ends). A reference may dangle (the element was deleted, or is not there
 * yet): readers then treat it as absent.
 */
export function elementRefs(el: BoardElement): string[] {
  if (el.type === 'text') return el.container_id ? [el.container_id] : [];
  if (el.type === 'line' || el.type === 'arrow') {
    const out: string[] = [];
    if (el.start_binding) out.push(el.start_binding.element_id);
    if (el.end_binding) out.push(el.end_binding.element_id);
    return out;
  }
  return [];
}

export const PageSchema = z
  .object({ id: IdSchema, name: z.string().trim().min(1).max(L.pageName) })
  .strict()
  .meta({ id: 'BoardPage' });
export type BoardPage = z.infer<typeof PageSchema>;

// ---- operations: one schema per operation type ----

const elements = z.array(ElementSchema).min(1).max(L.elementsPerOp);
export const ElementAddOp = z.object({ type: z.literal('element.add'), elements }).strict();
export const ElementUpdateOp = z.object({ type: z.literal('element.update'), elements }).strict();
/** A delete is a tombstone with its own version: a later version of the element revives it (undo, redo). */
export const TombstoneSchema = z.object({ id: IdSchema, version: base.version, version_nonce: base.version_nonce }).strict();
export type Tombstone = z.infer<typeof TombstoneSchema>;
export const ElementDeleteOp = z
  .object({ type: z.literal('element.delete'), elements: z.array(TombstoneSchema).min(1).max(L.elementsPerOp) })
  .strict();
export const PageAddOp = z
  .object({ type: z.literal('page.add'), page: PageSchema, after_page_id: IdSchema.nullable().default(null) })
  .strict();
export const PageRenameOp = z.object({ type: z.literal('page.rename'), page_id: IdSchema, name: PageSchema.shape.name }).strict();
export const PageDeleteOp = z.object({ type: z.literal('page.delete'), page_id: IdSchema }).strict();
export const PageReorderOp = z
  .object({ type: z.literal('page.reorder'), page_ids: z.array(IdSchema).min(1).max(L.pages) })
  .strict();
export const PagePinOp = z.object({ type: z.literal('page.pin'), page_id: IdSchema.nullable() }).strict();

export const BoardOpSchema = z
  .discriminatedUnion('type', [ElementAddOp, ElementUpdateOp, ElementDeleteOp, PageAddOp, PageRenameOp, PageDeleteOp, PageReorderOp, PagePinOp])
  .meta({ id: 'BoardOperation' });
export type BoardOp = z.infer<typeof BoardOpSchema>;

/** An operation as committed: its place in the lesson's order. */
export interface SequencedOp {
  seq: number;
  op: BoardOp;
  /** element ids of the operation as sent that lost to a newer version and were not applied (the sender needs them; others get `op` as applied) */
  skipped?: string[];
  /** opaque id of the connection that sent it (the gateway's choice), so it can ack its sender instead of echoing */
  origin?: string;
  /** writes of the teacher's operation the server stamped one above the stored version (the sender takes these stamps; others get `op` as applied) */
  restamped?: Tombstone[];
}

/** A file of the lesson as the snapshot lists it (its bytes: GET /lessons/{id}/files/{file_id}). */
export const FileInfoSchema = z
  .object({
    id: FileIdSchema,
    type: z.enum(['image/png', 'image/jpeg', 'image/webp']),
    size: z.number().int().describe('bytes'),
    width: z.number().int().describe('pixels'),
    height: z.number().int().describe('pixels'),
  })
  .strict()
  .meta({ id: 'BoardFile' });
export type FileInfo = z.infer<typeof FileInfoSchema>;

export const SnapshotSchema = z
  .object({
    format: z.literal(SNAPSHOT_FORMAT),
    version: z.literal(SNAPSHOT_VERSION),
    lesson_id: z.string(),
    seq: z.number().int().describe('sequence number of the last operation included'),
    updated_at: z.iso.datetime().nullable(),
    pinned_page_id: z.string().nullable(),
    pages: z.array(PageSchema),
    elements: z.array(ElementSchema).describe('per page in stacking order (bottom first)'),
    files: z.array(FileInfoSchema).describe("the lesson's files, oldest first"),
  })
  .meta({ id: 'BoardSnapshot' });
export type Snapshot = z.infer<typeof SnapshotSchema>;

/** The page every board starts with; a fixed id, so concurrent first writers agree. */
export const DEFAULT_PAGES: BoardPage[] = [{ id: 'page-1', name: 'Page 1' }];
