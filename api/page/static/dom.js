// The page's one look-up of an element by id, shared by every module.
export const $ = (id) => document.getElementById(id);
