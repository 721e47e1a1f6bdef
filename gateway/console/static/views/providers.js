export async function render(main) { main.append(document.createTextNode('This page is not written yet.')); }
